"""`LoraSlot`: the one LoRA adapter the `hf` rollout serves on top of its base model, as verl's vLLM path does.

verl (model.lora.merge=False) sends an adapter as `peft_config` (`LoraConfig.to_dict()`, target modules already
resolved) plus peft's adapter state dict (`base_model.model.<module>.lora_A.weight`, ...). vLLM drops its old
adapter and adds the new one as a `LoRARequest` applied on the unmerged base. Here peft injects the same LoRA
layers into the served model in place (`model.generate` then runs base + B(A(x)) * scaling, the trainer's own
math) and the tensors replace the previous adapter's; a different config rebuilds the layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from verl_cua.integrations.verl.hf_rollout.names import normalize_param_name, strip_wrappers

PEFT_PREFIX = "base_model.model."


def lora_config(peft_config: Mapping[str, Any]) -> Any:
    """A peft `LoraConfig` (inference mode) from the dict verl sends."""
    from peft import LoraConfig

    config = LoraConfig.from_peft_type(**dict(peft_config))
    config.inference_mode = True
    return config


def _comparable(peft_config: Mapping[str, Any]) -> dict[str, Any]:
    """The config fields that shape the LoRA layers (bookkeeping such as the base model's path dropped)."""
    ignored = {"base_model_name_or_path", "revision", "peft_version", "inference_mode", "task_type", "auto_mapping"}
    return {k: sorted(v) if isinstance(v, set) else v for k, v in peft_config.items() if k not in ignored}


class LoraSlot:
    """Holds at most one adapter on `model` (LoRA layers injected in place); loading one replaces the last."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.peft_model: Any = None
        self.config: dict[str, Any] | None = None

    @torch.no_grad()
    def load(self, peft_config: Mapping[str, Any], items: list[tuple[str, torch.Tensor]]) -> int:
        """Replace the adapter with `items` (every adapter tensor of `peft_config`); returns how many were loaded."""
        from peft import get_peft_model
        from peft.utils import set_peft_model_state_dict

        config = _comparable(peft_config)
        if self.config != config:
            self.unload()
            self.peft_model = get_peft_model(self.model, lora_config(peft_config))
            self.peft_model.eval().requires_grad_(False)
            self.config = config
        state = self._resolve(items)
        result = set_peft_model_state_dict(self.peft_model, state)
        if result.unexpected_keys:
            raise KeyError(f"hf rollout: peft left adapter tensors unloaded: {result.unexpected_keys[:3]}")
        return len(state)

    def unload(self) -> None:
        """Remove the LoRA layers (the base weights stay as they are)."""
        if self.peft_model is not None:
            self.peft_model.base_model.unload()
        self.peft_model, self.config = None, None

    def _resolve(self, items: list[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Map trainer names onto this model's adapter keys; all or nothing, and every adapter tensor present."""
        from peft.utils import get_peft_model_state_dict

        expected = {k.removeprefix(PEFT_PREFIX): (k, v) for k, v in get_peft_model_state_dict(self.peft_model).items()}
        state, unknown = {}, []
        for name, tensor in items:
            key = normalize_param_name(strip_wrappers(name).removeprefix(PEFT_PREFIX), expected)
            if key is None:
                unknown.append(name)
                continue
            full, target = expected[key]
            if tuple(target.shape) != tuple(tensor.shape):
                raise ValueError(
                    f"hf rollout: adapter tensor {name} has shape {tuple(tensor.shape)}, expected {tuple(target.shape)}"
                )
            state[full] = tensor.detach().to(dtype=target.dtype)
        if unknown:
            raise KeyError(
                f"hf rollout: {len(unknown)} adapter tensor(s) match no LoRA layer of the peft_config, "
                f"e.g. {unknown[:3]}; LoRA keys look like {[v[0] for v in list(expected.values())[:2]]}"
            )
        missing = sorted({full for full, _ in expected.values()} - set(state))
        if missing:
            raise KeyError(f"hf rollout: the adapter sync lacks {len(missing)} LoRA tensor(s), e.g. {missing[:3]}")
        return state
