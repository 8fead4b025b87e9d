"""Python tools for configs/example.yaml: plain functions, schemas derived from type hints."""

from __future__ import annotations

from typing import Annotated, Literal


def word_count(text: str, unit: Literal["words", "lines", "chars"] = "words") -> int:
    """Count the words, lines or characters of a text.

    Args:
        text: The text to measure.
        unit: What to count.
    """
    if unit == "lines":
        return len(text.splitlines())
    if unit == "chars":
        return len(text)
    return len(text.split())


async def convert_temperature(
    celsius: Annotated[float, "Temperature in degrees Celsius"],
) -> dict[str, float]:
    """Convert a Celsius temperature to Fahrenheit and Kelvin."""
    return {"fahrenheit": round(celsius * 9 / 5 + 32, 2), "kelvin": round(celsius + 273.15, 2)}
