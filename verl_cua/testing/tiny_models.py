"""Tiny, random Qwen2.5-VL and Qwen3-VL checkpoints built locally (no hub access), for CPU tests and the quickstart.

The weights are random (seeded) and the tokenizer is a ~3k byte-level BPE trained here on a small built-in corpus:
these directories exercise the real code paths (stock transformers classes, verl's Qwen-VL handling, M-RoPE,
image-token expansion) but are not a usable model. A few MB each, float32 safetensors, tied word embeddings.

    python -m verl_cua.testing.tiny_models --family qwen25vl [--out DIR] [--seed N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any

from verl_cua.testing.model_cache import cache_lock

FAMILIES = ("qwen25vl", "qwen3vl")
RECIPE_VERSION = "1"
MARKER = "tiny_model.json"

# Special tokens (stripped by skip_special_tokens) and plain added tokens (kept), as in Qwen's tokenizers.
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
ADDED_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")
TOKENIZER_VOCAB = 3000
TOKENIZER_CLASS = "PreTrainedTokenizerFast"
# Qwen2's pre-tokenization split (single digits, words with one leading non-letter, punctuation runs, newlines), so
# transformers' `Qwen2Tokenizer`, which rebuilds this pipeline from vocab + merges, encodes exactly like tokenizer.json.
_PRETOKENIZE = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Text transformer: head_dim 16, so the M-RoPE sections cover head_dim // 2 == 8 frequencies.
_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
}
_FAMILY = {
    "qwen25vl": {
        "rope": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
        "vision": {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 14,
            "window_size": 112,
            "fullatt_block_indexes": [1],
            "tokens_per_second": 2,
        },
        "patch": 14,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "default_system": "You are a helpful assistant.",
    },
    "qwen3vl": {
        "rope": {
            "rope_type": "default",
            "rope_theta": 5000000.0,
            "mrope_section": [4, 2, 2],
            "mrope_interleaved": True,
        },
        "vision": {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 16,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
        },
        "patch": 16,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "default_system": "",
    },
}
HEAD_DIMS = (16, 32, 64)  # 16: the default; 32 and up for vLLM's CPU attention (same width: fewer, wider heads)


def text_spec(head_dim: int = 16) -> dict[str, Any]:
    """The text transformer's shape for `head_dim` (the hidden size stays; heads = hidden // head_dim)."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"unsupported head_dim {head_dim}; valid: {', '.join(map(str, HEAD_DIMS))}")
    if head_dim == _TEXT["head_dim"]:
        return _TEXT
    heads = _TEXT["hidden_size"] // head_dim
    return dict(_TEXT, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), head_dim=head_dim)


def family_spec(family: str, head_dim: int = 16) -> dict[str, Any]:
    """`family`'s settings, with its M-RoPE sections scaled to cover `head_dim // 2` frequencies."""
    spec = _FAMILY[_check(family)]
    scale = head_dim // _TEXT["head_dim"]
    if scale == 1:
        return spec
    rope = dict(spec["rope"], mrope_section=[n * scale for n in spec["rope"]["mrope_section"]])
    return dict(spec, rope=rope)


# Image limits in merged tokens (patch * merge_size pixels square each): a 160x210 screenshot gives ~40 tokens.
MIN_IMAGE_TOKENS = 4
MAX_IMAGE_TOKENS = 64
MERGE_SIZE = 2

# ---- chat template (Qwen ChatML; written for these test models) -------------------------------------------------

# Every tag strips the whitespace around it and all text is emitted by expressions, so the source layout (and
# transformers' trim_blocks/lstrip_blocks) cannot change the output. `@@DEFAULT_SYSTEM@@` is the family's default
# system prompt (a JSON string literal): Qwen2.5-VL uses one when the messages have no system turn, Qwen3-VL none.
_CHAT_TEMPLATE = r"""
{%- set default_system = @@DEFAULT_SYSTEM@@ -%}
{%- set ns = namespace(images=0, videos=0) -%}
{%- macro render(content) -%}
  {%- if content is string -%}
    {{- content -}}
  {%- elif content is not none -%}
    {%- for part in content -%}
      {%- if part is string -%}
        {{- part -}}
      {%- elif part.type == 'image' or part.type == 'image_url' or 'image' in part or 'image_url' in part -%}
        {%- set ns.images = ns.images + 1 -%}
        {%- if add_vision_id -%}{{- 'Picture ' ~ ns.images ~ ': ' -}}{%- endif -%}
        {{- '<|vision_start|><|image_pad|><|vision_end|>' -}}
      {%- elif part.type == 'video' or 'video' in part -%}
        {%- set ns.videos = ns.videos + 1 -%}
        {%- if add_vision_id -%}{{- 'Video ' ~ ns.videos ~ ': ' -}}{%- endif -%}
        {{- '<|vision_start|><|video_pad|><|vision_end|>' -}}
      {%- elif 'text' in part -%}
        {{- part.text -}}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
{%- endmacro -%}
{%- set has_system = messages | length > 0 and messages[0].role == 'system' -%}
{%- if tools -%}
  {{- '<|im_start|>system\n' -}}
  {%- if has_system -%}
    {{- render(messages[0].content) ~ '\n\n' -}}
  {%- elif default_system -%}
    {{- default_system ~ '\n\n' -}}
  {%- endif -%}
  {{- '# Tools\n\nYou may call one or more functions to help with the user\'s request.\n\n' -}}
  {{- 'The available functions are described by these JSON signatures inside <tools></tools> XML tags:\n<tools>' -}}
  {%- for tool in tools -%}
    {{- '\n' ~ (tool | tojson) -}}
  {%- endfor -%}
  {{- '\n</tools>\n\nTo call a function, reply with a JSON object holding its name and arguments inside ' -}}
  {{- '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}' -}}
  {{- '\n</tool_call><|im_end|>\n' -}}
{%- elif has_system -%}
  {{- '<|im_start|>system\n' ~ render(messages[0].content) ~ '<|im_end|>\n' -}}
{%- elif default_system -%}
  {{- '<|im_start|>system\n' ~ default_system ~ '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
  {%- if loop.first and has_system -%}
  {%- elif message.role == 'tool' -%}
    {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
    {{- '\n<tool_response>\n' ~ render(message.content) ~ '\n</tool_response>' -}}
    {%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
  {%- elif message.role == 'assistant' -%}
    {{- '<|im_start|>assistant\n' ~ render(message.content) -}}
    {%- for call in message.tool_calls or [] -%}
      {%- set fn = call.function if call.function is defined else call -%}
      {%- if message.content or not loop.first -%}{{- '\n' -}}{%- endif -%}
      {{- '<tool_call>\n{"name": "' ~ fn.name ~ '", "arguments": ' -}}
      {%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
      {{- '}\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\n' -}}
  {%- else -%}
    {{- '<|im_start|>' ~ message.role ~ '\n' ~ render(message.content) ~ '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
"""


def chat_template(family: str) -> str:
    """The Jinja chat template saved with `family`'s tiny model (Qwen2.5-VL adds a default system prompt)."""
    default_system = json.dumps(_FAMILY[_check(family)]["default_system"])
    return _CHAT_TEMPLATE.strip("\n").replace("@@DEFAULT_SYSTEM@@", default_system)


# ---- the built-in tokenizer corpus ----------------------------------------------------------------------------

_PROSE = """\
You are a helpful assistant that operates a computer with the mouse and the keyboard.
Click the Submit button at the bottom of the form, then wait for the page to load.
Type the user name into the text field and press Enter to log in.
Open the file menu, choose Save As, and write the report to the Documents folder.
The screenshot shows a browser window with a search box, three links and a blue button.
Select the checkbox next to the second item in the list, then scroll down to the end.
Drag the slider to the right until the value reads 75 percent, and release the mouse.
Double click the icon on the desktop to open the terminal application.
If the task is finished, reply DONE; if it cannot be done, reply FAIL; otherwise WAIT.
Thought: the search field is at the top of the page, so I will click it first.
Action: click on the element labelled "OK" and then type the answer.
Find the email from Alice about the meeting on Monday at 10:30 and forward it to Bob.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!
What is the capital of France? Paris. How many days are in a week? Seven.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 3.14 -7 1e-3 2024-05-17 12:45:09
Punctuation: , . ; : ! ? ' " ( ) [ ] { } < > / \\ | @ # $ % ^ & * - + = _ ~ `
"""
_CODE = """\
import pyautogui
import time

def main() -> None:
    pyautogui.moveTo(100, 200)
    pyautogui.click(12, 34)
    pyautogui.doubleClick(640, 360, button="left")
    pyautogui.rightClick(x=5, y=99)
    pyautogui.typewrite("hello world", interval=0.05)
    pyautogui.write("user@example.com")
    pyautogui.press("enter")
    pyautogui.hotkey("ctrl", "shift", "t")
    pyautogui.scroll(-5)
    pyautogui.dragTo(300, 400, duration=0.5)
    time.sleep(1)

if __name__ == "__main__":
    main()
```python
pyautogui.click(120, 45)
```
"""
_JSON = """\
{"type": "function", "function": {"name": "computer_use", "description": "Use a mouse and keyboard.", \
"parameters": {"type": "object", "properties": {"action": {"type": "string", "enum": ["click", "type", "key", \
"scroll", "wait", "terminate"]}, "coordinate": {"type": "array"}, "text": {"type": "string"}}, \
"required": ["action"]}}}
{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [512, 384]}}
{"id": 7, "ok": true, "value": null, "items": [1, 2.5, "three"], "nested": {"key": "value"}}
<tool_call>
{"name": "computer_use", "arguments": {"action": "type", "text": "hello"}}
</tool_call>
<tool_response>
{"status": "success", "screenshot": "attached"}
</tool_response>
<think>
The button is on the left, so I click it.
</think>
"""


_WORDS = """\
the a an and or but if then else when while for to of in on at by with from into over under up down left right
top bottom middle center first second third last next previous new old open close save load copy paste cut undo
redo delete remove add insert edit view help file folder document page window tab menu button link icon image
picture text field box list item row column table cell sheet chart slide title header footer label value name
email address password user account login logout sign search find replace filter sort select choose pick check
uncheck toggle enable disable show hide expand collapse scroll drag drop move resize zoom click double press type
write read enter escape space backspace shift control alt command option function key keyboard mouse cursor
pointer screen display monitor desktop terminal browser chrome firefox office writer calc impress editor code
python script program run stop start restart install update upgrade settings preferences options system network
wifi bluetooth sound volume brightness battery power date time clock calendar event meeting reminder note task
todo done finished complete success failure error warning message dialog popup alert notification confirm cancel
ok yes no accept decline submit send reply forward archive trash spam inbox outbox draft subject attachment upload
download share print export import format font bold italic underline color red green blue black white gray yellow
orange purple size small medium large width height number count total sum average minimum maximum percent price
cost amount order cart checkout payment card shipping delivery product store shop buy sell customer client server
request response status result output input data database query record report summary detail description comment
post article blog news video audio music song play pause volume mute track album artist movie photo camera gallery
map location city country street home work school office company team project group channel thread chat call
phone contact friend family person people student teacher doctor patient hospital restaurant hotel flight ticket
travel trip booking reservation weather temperature rain sunny cloudy wind morning afternoon evening night today
tomorrow yesterday week month year monday tuesday wednesday thursday friday saturday sunday january february march
april may june july august september october november december spring summer autumn winter is are was were be been
being have has had do does did will would can could should must might shall need want like make get give take
go come see look watch hear say tell ask answer think know believe feel try use find keep let begin seem help
turn follow change learn understand remember forget happen appear continue set put bring build create design
develop test debug fix solve compute calculate measure compare convert translate explain describe identify locate
navigate visit browse refresh reload return exit quit finish wait sleep wake this that these those here there
where what which who whom whose why how all any each every some many much more most few less least other another
such same different own only just also very too quite rather almost always never often sometimes usually again
still already yet soon now before after during until since because although though however therefore instead
above below between among around through across along behind beside inside outside near far without within true
false none null undefined return import class def self lambda async await yield raise except finally assert
global pass break elif print range len str int float bool dict tuple args kwargs json xml html css http https www
com org api url path directory filename extension config parameter argument variable constant string integer array
object element attribute property method module package library framework version release branch commit merge
pull push clone fetch repository issue bug feature documentation tutorial example sample demo template layout
sidebar toolbar navbar dropdown checkbox radio slider spinner textbox textarea combobox tooltip modal panel frame
grid flex container wrapper canvas svg pixel coordinate position offset margin padding border radius shadow
opacity visible hidden active inactive focused disabled selected highlighted pressed hovered loading loaded
"""


def corpus() -> list[str]:
    """The built-in tokenizer corpus: prose, digits and punctuation, pyautogui code, JSON and tool-call XML."""
    rng = random.Random(0)  # fixed: the tokenizer (and so every token id) is the same whatever the model's seed
    words = _WORDS.split()
    lines = [*_PROSE.splitlines(), *_CODE.splitlines(), *_JSON.splitlines()]
    verbs = ("click", "doubleClick", "rightClick", "moveTo")
    for _ in range(300):
        x, y = rng.randrange(2000), rng.randrange(2000)
        lines.append(f"pyautogui.{rng.choice(verbs)}({x}, {y})")
        lines.append(json.dumps({"name": "computer_use", "arguments": {"action": "click", "coordinate": [x, y]}}))
    for _ in range(3000):
        sentence = " ".join(rng.choice(words) for _ in range(rng.randrange(4, 14)))
        lines.append(sentence[0].upper() + sentence[1:] + rng.choice(".?!:;,"))
    lines += (
        [w.capitalize() for w in words]
        + [w.upper() for w in words[:100]]
        + [f"{a}_{b}" for a, b in zip(words[:-1], words[1:], strict=True)]
    )
    return lines


# ---- recipe, cache -------------------------------------------------------------------------------------------


def _check(family: str) -> str:
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")
    return family


def _recipe(family: str, seed: int, head_dim: int = 16) -> dict[str, Any]:
    transformers_version = ".".join(_dist_version("transformers").split(".")[:2])
    return {
        "version": RECIPE_VERSION,
        "family": family,
        "seed": seed,
        "text": text_spec(head_dim),
        "family_spec": family_spec(family, head_dim),
        "tokens": [SPECIAL_TOKENS, ADDED_TOKENS, TOKENIZER_VOCAB, TOKENIZER_CLASS, _PRETOKENIZE],
        "image_tokens": [MIN_IMAGE_TOKENS, MAX_IMAGE_TOKENS, MERGE_SIZE],
        "corpus": hashlib.sha256("\n".join(corpus()).encode()).hexdigest(),
        "template": chat_template(family),
        "transformers": transformers_version,
    }


def _recipe_key(family: str, seed: int, head_dim: int = 16) -> str:
    blob = json.dumps(_recipe(family, seed, head_dim), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def cache_root() -> Path:
    """Where built models are cached: `$VERL_CUA_CACHE` (or ~/.cache/verl-cua) + /tiny-models."""
    base = os.environ.get("VERL_CUA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "verl-cua")
    return Path(base) / "tiny-models"


def _is_built(path: Path, key: str) -> bool:
    try:
        return json.loads((path / MARKER).read_text())["key"] == key
    except (OSError, ValueError, KeyError):
        return False


def build_tiny_model(
    family: str, out_dir: str | os.PathLike | None = None, *, seed: int = 0, head_dim: int = 16
) -> Path:
    """Build (or reuse from cache) a tiny random `family` model directory; returns its path. `head_dim` 32 gives the
    models vLLM's CPU attention can run (the default 16's cache keys, and every model built on them, stay)."""
    key = _recipe_key(_check(family), seed, text_spec(head_dim)["head_dim"])
    dest = Path(out_dir) if out_dir is not None else cache_root() / f"{family}-{key}"
    if _is_built(dest, key):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock(dest.parent / f".{dest.name}.lock", dest.name):
        if _is_built(dest, key):
            return dest
        _clear(dest)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
        try:
            _write_model(family, seed, tmp, head_dim)
            recipe = _recipe(family, seed, head_dim)
            (tmp / MARKER).write_text(json.dumps({"key": key, **recipe}, indent=1, sort_keys=True))
            _make_readable(tmp)
            os.replace(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _clear(dest: Path) -> None:
    """Remove an empty `dest` or a tiny model of another recipe there; refuse to touch anything else."""
    if (dest / MARKER).is_file():
        shutil.rmtree(dest)
    elif dest.exists():
        if not dest.is_dir() or any(dest.iterdir()):
            raise FileExistsError(f"{dest} exists and is not a tiny model directory")
        dest.rmdir()


def _make_readable(path: Path) -> None:
    """mkdtemp makes a 0700 directory: give it (and its files) the usual umask-based modes before publishing."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)
    for child in path.iterdir():
        os.chmod(child, 0o666 & ~umask)


# ---- building ------------------------------------------------------------------------------------------------


def train_tokenizer(family: str) -> Any:
    """A byte-level BPE trained on the built-in corpus, with Qwen's special tokens, as a fast tokenizer."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_PRETOKENIZE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
        clean_up_tokenization_spaces=False,
        model_max_length=_TEXT["max_position_embeddings"],
        chat_template=chat_template(family),
        split_special_tokens=False,
    )


def _padded_vocab(tokenizer: Any) -> int:
    return -(-len(tokenizer) // 64) * 64


def _model_config(family: str, tokenizer: Any, head_dim: int = 16) -> Any:
    import torch

    spec = family_spec(family, head_dim)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = dict(text_spec(head_dim), vocab_size=_padded_vocab(tokenizer), rope_parameters=dict(spec["rope"]))
    text.update(bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    vision = dict(spec["vision"], out_hidden_size=_TEXT["hidden_size"], spatial_merge_size=MERGE_SIZE)
    if family == "qwen25vl":
        from transformers import Qwen2_5_VLConfig as Config

        text.pop("head_dim")  # Qwen2.5-VL derives it: hidden_size // num_attention_heads
    else:
        from transformers import Qwen3VLConfig as Config
    config = Config(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=_TEXT["tie_word_embeddings"],
    )
    config.dtype = torch.float32
    return config


def _processor(family: str, tokenizer: Any) -> Any:
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    spec = _FAMILY[family]
    patch = spec["patch"]
    unit = (patch * MERGE_SIZE) ** 2
    size = {"shortest_edge": MIN_IMAGE_TOKENS * unit, "longest_edge": MAX_IMAGE_TOKENS * unit}
    norm = {"image_mean": spec["image_mean"], "image_std": spec["image_std"]}
    image = Qwen2VLImageProcessor(patch_size=patch, merge_size=MERGE_SIZE, temporal_patch_size=2, size=size, **norm)
    video_size = {"shortest_edge": MIN_IMAGE_TOKENS * unit * 2, "longest_edge": MAX_IMAGE_TOKENS * unit * 8}
    if family == "qwen25vl":
        from transformers import Qwen2_5_VLProcessor as Processor
        from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor as Video
    else:
        from transformers import Qwen3VLProcessor as Processor
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor as Video
    video = Video(patch_size=patch, merge_size=MERGE_SIZE, temporal_patch_size=2, size=video_size, **norm)
    return Processor(
        image_processor=image, tokenizer=tokenizer, video_processor=video, chat_template=chat_template(family)
    )


def _set_tokenizer_class(path: Path) -> None:
    """Pin `tokenizer_class`: `PreTrainedTokenizerFast` loads tokenizer.json as is (transformers 4 and 5)."""
    config = json.loads(path.read_text())
    config["tokenizer_class"] = TOKENIZER_CLASS
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _write_model(family: str, seed: int, out: Path, head_dim: int = 16) -> None:
    """Train the tokenizer, make the processor and a seeded random model, and save all three into `out`."""
    import torch
    from transformers import AutoModelForImageTextToText, GenerationConfig

    tokenizer = train_tokenizer(family)
    _processor(family, tokenizer).save_pretrained(out)  # with the tokenizer and the chat template
    _set_tokenizer_class(out / "tokenizer_config.json")
    config = _model_config(family, tokenizer, head_dim)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    model.generation_config = GenerationConfig(eos_token_id=ids, pad_token_id=ids[1], bos_token_id=None)
    model.save_pretrained(out, safe_serialization=True)


# ---- CLI -----------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """`python -m verl_cua.testing.tiny_models --family F [--out DIR] [--seed N]`: build and print the path."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", required=True, help=f"one of {', '.join(FAMILIES)}")
    parser.add_argument("--out", default=None, help="directory to build into (default: the cache)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--head-dim", type=int, default=16, help=f"one of {', '.join(map(str, HEAD_DIMS))} "
                                                                 "(32: for vLLM's CPU attention)")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        path = build_tiny_model(args.family, args.out, seed=args.seed, head_dim=args.head_dim)
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
