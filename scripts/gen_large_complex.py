#!/usr/bin/env python3
"""Writes scenarios/large_complex/payload: the complex_proto request with 6000 distinct pets.

About 166 KB encoded: the "big and complex request" for which deserialization cost matters.
Re-run after changing the count; the output is deterministic.
"""
import json
import pathlib

COLORS = ["BLACK", "WHITE", "BLUE", "RED", "YELLOW", "GREEN"]
PETS = 6000

request = {
    "name": "a large and complex request",
    "d": 4.55332,
    "f": 232.3,
    "b": True,
    "n": 32,
    "l": 444325235223,
    "c1": "ofcouse",
    "pets": [
        {"name": f"pet {i:06d} of the herd", "color": COLORS[i % len(COLORS)]}
        for i in range(PETS)
    ],
}
out = pathlib.Path(__file__).resolve().parent.parent / "scenarios" / "large_complex" / "payload"
out.write_text(json.dumps({"request": request}, separators=(",", ":")) + "\n")
print(f"wrote {out} ({out.stat().st_size} bytes of JSON)")
