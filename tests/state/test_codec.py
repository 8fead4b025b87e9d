"""A `Result` through JSON and back, as the Redis cache stores it."""

from __future__ import annotations

import pytest

from toolnexus import AudioPart, ImagePart, ResourcePart, Result, TextPart
from toolnexus.state.codec import dump_result, load_result


def test_every_part_kind_survives_the_round_trip() -> None:
    result = Result(
        content="before the parts",
        parts=(
            ImagePart(data=b"\x89PNG\x00\xff", mime_type="image/png", annotations={"priority": 1}),
            AudioPart(data=bytes(range(256)), mime_type="audio/wav"),
            ResourcePart(uri="file:///a.bin", mime_type="application/octet-stream", data=b"\0"),
            ResourcePart(uri="file:///a.txt", text="héllo"),
            TextPart(text="after", annotations={"audience": ["user"]}),
        ),
        structured={"rows": [1, 2.5, None, "ü"]},
        is_error=False,
        metadata={"exit_code": 0, "duration_ms": 1.5},
    )
    assert load_result(dump_result(result)) == result


def test_a_result_holding_an_object_is_not_stored_changed() -> None:
    with pytest.raises(TypeError):
        dump_result(Result(content="x", metadata={"when": object()}))
    with pytest.raises(ValueError):
        dump_result(Result(content="x", structured=float("nan")))
