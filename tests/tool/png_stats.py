#!/usr/bin/env python3
"""Prints "WIDTHxHEIGHT COLOURS COLOURFUL_PERCENT" for an 8-bit, non-interlaced
PNG (what Chromium's --screenshot writes), with the standard library only:
the report test checks that a screenshot is not blank. Colourful pixels
(channels apart by more than 60) are the charts': text, borders and page
background are grey."""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    if depth != 8 or interlace or ctype not in (2, 6):
        sys.exit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # undo the row filter (PNG spec, section 9)
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


w, h, bpp, rows = pixels(sys.argv[1])
colours, colourful = set(), 0
for line in rows[::2]:  # every other row: plenty for a count, half the time
    for x in range(0, w * bpp, bpp * 2):
        px = line[x:x + 3]
        colours.add(px)
        colourful += max(px) - min(px) > 60
sampled = ((h + 1) // 2) * ((w + 1) // 2)
print(f"{w}x{h} {len(colours)} {100.0 * colourful / sampled:.1f}")
