"""`TextDeltas`, the streamer behind `stream: true`, on a toy byte tokenizer whose characters span several tokens:
the pieces it emits join to the reply, never hold a stop string or a half character, and a stop string ends the
generation; and the chunk framing OpenAI's clients parse."""

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from verl_cua.serve.chat import cut_at_stop
from verl_cua.serve.stream import DONE, ChunkStream, StopGeneration, TextDeltas


class ByteTokenizer:
    """A token is one UTF-8 byte (a character of 2-4 bytes is 2-4 tokens); 0 is a special token."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return bytes(i for i in ids if i != 0).decode("utf-8", errors="replace")


class Ids(list):
    """A token id tensor's `reshape(-1).tolist()`, as `generate` puts it."""

    def reshape(self, *_):
        return self

    def tolist(self):
        return list(self)


def _stream(text: str, stop: list[str]) -> tuple[list[str], TextDeltas, bool]:
    pieces: list[str] = []
    deltas = TextDeltas(ByteTokenizer(), stop, pieces.append)
    deltas.put(Ids([5, 6, 7]))  # the prompt: never emitted
    stopped = False
    try:
        for byte in text.encode():
            deltas.put(Ids([byte]))
        deltas.put(Ids([0]))  # the stop id
    except StopGeneration:
        stopped = True
    else:
        deltas.end()
    return pieces, deltas, stopped


# encodable text; byte 0 is the toy tokenizer's special token, U+FFFD what it decodes a partial character to
_chars = st.characters(codec="utf-8", blacklist_characters="\x00\ufffd")


@given(text=st.text(_chars, max_size=40), stop=st.lists(st.text(_chars, min_size=1, max_size=3), max_size=2))
def test_the_pieces_join_to_the_reply_cut_at_the_first_stop_string(text, stop):
    # a stop string inside another ends the reply where it completes, before the longer one would (as vLLM does),
    # which is not where cutting the whole text would: left out of this comparison
    assume(not any(a in b for i, a in enumerate(stop) for j, b in enumerate(stop) if i != j))
    pieces, deltas, stopped = _stream(text, stop)
    expected, found = cut_at_stop(text, stop)
    assert "".join(pieces) == deltas.text == expected
    assert stopped == found and deltas.stopped == found
    assert all(piece and "\ufffd" not in piece for piece in pieces)
    assert not any(s in piece for piece in pieces for s in stop)


def test_a_character_is_sent_whole_and_a_stop_prefix_waits():
    pieces, _, _ = _stream("é→ok", [])
    assert pieces == ["é", "→", "o", "k"]  # é is 2 tokens, → is 3: each is sent once it is whole
    pieces, _, stopped = _stream("a</b>c", ["</b>"])
    assert (pieces, stopped) == (["a"], True)  # "<", "</", "</b" were held, then the stop string cut them
    pieces, _, stopped = _stream("a</x", ["</b>"])
    assert ("".join(pieces), stopped) == ("a</x", False)  # held back, then sent once it could not be a stop
    pieces, _, stopped = _stream("baa", ["a", "baa"])
    assert (pieces, stopped) == (["b"], True)  # the stop string completed first ends it


@pytest.mark.parametrize("include_usage", [False, True])
def test_chunks_are_openai_events_ending_in_done(include_usage):
    sent: list[bytes] = []
    chunks = ChunkStream(sent.append, "chatcmpl-1", 7, "tiny", include_usage)
    chunks.delta(0, {"role": "assistant", "content": ""})
    chunks.delta(0, {"content": "hi"})
    chunks.delta(0, {}, "stop")
    chunks.close({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    assert sent[-1] == DONE and all(e.startswith(b"data: ") and e.endswith(b"\n\n") for e in sent)
    events = [json.loads(e[len(b"data: ") :]) for e in sent[:-1]]
    assert {(e["id"], e["object"], e["created"], e["model"]) for e in events} == {
        ("chatcmpl-1", "chat.completion.chunk", 7, "tiny")
    }
    assert [c["finish_reason"] for e in events[:3] for c in e["choices"]] == [None, None, "stop"]
    if include_usage:
        assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] == 5
        assert all(e["usage"] is None for e in events[:-1])
    else:
        assert len(events) == 3 and all("usage" not in e for e in events)
