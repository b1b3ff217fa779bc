"""Tiny, valid media files built at import time: a 1x1 PNG and a short WAV tone.

Built with the standard library rather than shipped as opaque base64, so a reader can see
exactly what the conformance tools and prompts return.
"""

from __future__ import annotations

import io
import math
import struct
import wave
import zlib


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_1x1(red: int = 255, green: int = 0, blue: int = 0) -> bytes:
    """A 1x1 truecolour PNG of one pixel (red by default)."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # width, height, depth 8, RGB, deflate, no filter/interlace
    scanline = bytes([0, red, green, blue])  # filter type 0, then the pixel
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(scanline)) + _png_chunk(b"IEND", b""))


def wav_tone(frequency: float = 440.0, milliseconds: int = 50, rate: int = 8000) -> bytes:
    """A mono 16-bit PCM WAV file holding a quiet sine tone."""
    frames = rate * milliseconds // 1000
    samples = b"".join(struct.pack("<h", round(8000 * math.sin(2 * math.pi * frequency * i / rate)))
                       for i in range(frames))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples)
    return buffer.getvalue()


PNG = png_1x1()
WAV = wav_tone()
