"""sft_loss: masked negative log-likelihood."""

import math

import torch

from verl_cua.algos.sft import sft_loss


def close(actual: torch.Tensor, expected: list) -> bool:
    """Elementwise closeness of a tensor to nested literal numbers."""
    return torch.allclose(actual.detach().double(), torch.tensor(expected, dtype=torch.float64), atol=1e-5)


def test_values_and_gradient():
    log_prob = torch.tensor([[-0.5, -2.0, -math.inf], [-1.0, -3.0, -0.25]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    loss = sft_loss(log_prob, mask)
    # -log_prob where mask == 1; the padded -inf is masked out, not propagated.
    assert close(loss, [[0.5, 2.0, 0.0], [0.0, 3.0, 0.25]])
    loss.sum().backward()
    assert log_prob.grad.tolist() == [[-1.0, -1.0, 0.0], [0.0, -1.0, -1.0]]
