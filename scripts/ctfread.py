#!/usr/bin/env python3
"""A small CTF 1.8 reader of the project's own, independent of babeltrace2, for
scripts/check-ctf.py: parses a trace directory's `metadata` (TSDL, the specification's
"Common Trace Format (CTF) v1.8.3" section 7) and decodes its binary stream files.

It reads what `ringtrace export --format ctf` writes, and refuses what it does not
know rather than guess: text metadata (not packetized); type aliases of integers
(byte-aligned, 8 to 64 bits, either byte order, optionally mapped to a clock),
floating point numbers (32 or 64 bits), strings (UTF-8) and structures, with
fixed-length arrays; one trace block, clocks, stream classes with a packet header,
packet context and event header, and event classes with a payload (`fields`). Each
packet's magic, trace UUID and stream id are checked, its `content_size` and
`packet_size` are obeyed, clock-mapped integers of fewer than 64 bits are widened as
the specification says (section 8), and the `events_discarded` counts become losses.
Where the metadata says (ringtrace's comment "In strings, the two characters \\\\ are
a backslash and \\0 a NUL"), strings are unescaped.

    python3 scripts/ctfread.py CTF_DIR    # prints each stream's events, one a line
"""

import datetime
import json
import os
import re
import struct
import sys

MAGIC = 0xC1FC1FC1
PACKETIZED_METADATA_MAGIC = 0x75D11D57
ESCAPE_NOTE = "/* In strings, the two characters \\\\ are a backslash and \\0 a NUL. */"

TOKEN = re.compile(
    r"\s+|/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"|:=|[{}\[\];=,:()<>]|"
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*|0[xX][0-9a-fA-F]+|-?[0-9]+",
    re.S,
)


class CtfError(Exception):
    """What this reader found wrong, or does not read, and where."""


class Int:
    def __init__(self, attrs):
        self.size = number(attrs.get("size"), "integer size")
        self.align = number(attrs.get("align", "8"), "integer align")
        self.signed = attrs.get("signed", "false") in ("true", "1")
        self.byte_order = attrs.get("byte_order")
        self.map = attrs.get("map")
        if self.size % 8 or not 8 <= self.size <= 64 or self.align % 8:
            raise CtfError(f"integer of {self.size} bits aligned on {self.align}: only byte-aligned integers are read")
        if self.map is not None and not re.fullmatch(r"clock\.[A-Za-z_][A-Za-z0-9_]*\.value", self.map):
            raise CtfError(f"integer mapped to {self.map!r}: only clock.NAME.value is read")


class Float:
    def __init__(self, attrs):
        exp, mant = number(attrs.get("exp_dig"), "exp_dig"), number(attrs.get("mant_dig"), "mant_dig")
        self.size = exp + mant
        if (exp, mant) not in ((8, 24), (11, 53)):
            raise CtfError(f"floating point of exp_dig {exp}, mant_dig {mant}: only IEEE 754 binary32 and binary64 are read")
        self.align = number(attrs.get("align", "8"), "floating point align")
        if self.align % 8:
            raise CtfError(f"floating point aligned on {self.align} bits: only byte-aligned ones are read")
        self.byte_order = attrs.get("byte_order")


class String:
    align = 8

    def __init__(self, attrs):
        enc = attrs.get("encoding", "UTF8")
        if enc not in ("UTF8", "ASCII"):
            raise CtfError(f"string encoding {enc}: only UTF8 and ASCII are read")


class Struct:
    def __init__(self, fields, min_align):
        self.fields = fields  # [(name, type)]
        self.align = max([min_align] + [t.align for _, t in fields])


class Array:
    def __init__(self, elem, length):
        self.elem, self.length, self.align = elem, length, elem.align


def number(text, what):
    try:
        return int(text, 0)
    except (TypeError, ValueError):
        raise CtfError(f"metadata: {what} {text!r} is not a number") from None


def unquote(tok):
    """A TSDL string literal's text (C escapes)."""
    out, i, body = [], 0, tok[1:-1]
    simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
        elif body[i + 1] == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
            if not m:
                raise CtfError(f"metadata: bad escape in {tok}")
            out.append(chr(int(m.group(), 16)))
            i += 2 + len(m.group())
        elif body[i + 1] in simple:
            out.append(simple[body[i + 1]])
            i += 2
        else:
            raise CtfError(f"metadata: unknown escape \\{body[i + 1]} in {tok}")
    return "".join(out)


class Metadata:
    """The parsed TSDL: the trace block, clocks, stream and event classes."""

    def __init__(self, text):
        self.aliases, self.trace, self.clocks, self.streams, self.events = {}, None, {}, {}, {}
        self.escaped_strings = ESCAPE_NOTE in text
        self.toks, self.i = [], 0
        pos = 0
        while pos < len(text):
            m = TOKEN.match(text, pos)
            if not m:
                raise CtfError(f"metadata: cannot read {text[pos:pos + 30]!r} (offset {pos})")
            pos = m.end()
            t = m.group()
            if not (t.isspace() or t.startswith("/*") or t.startswith("//")):
                self.toks.append(t)
        while self.peek() is not None:
            self.top()
        if self.trace is None:
            raise CtfError("metadata: no trace block")
        t = self.trace
        if (t.get("major"), t.get("minor")) != ("1", "8"):
            raise CtfError(f"metadata: CTF {t.get('major')}.{t.get('minor')}, not 1.8")
        if t.get("byte_order") not in ("le", "be", "network"):
            raise CtfError(f"metadata: trace byte_order {t.get('byte_order')!r}")
        self.byte_order = "<" if t["byte_order"] == "le" else ">"
        self.uuid = bytes.fromhex(t["uuid"].replace("-", "")) if "uuid" in t else None
        if not self.streams:
            self.streams[0] = {}
        for (sid, eid), e in self.events.items():
            if sid not in self.streams:
                raise CtfError(f"metadata: event {e.get('name')!r} names stream {sid}, which is not declared")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want=None):
        t = self.peek()
        if t is None:
            raise CtfError(f"metadata: ends early (expected {want or 'more'})")
        if want is not None and t != want:
            context = " ".join(self.toks[max(0, self.i - 6) : self.i + 3])
            raise CtfError(f"metadata: expected {want!r}, found {t!r} near: {context}")
        self.i += 1
        return t

    def top(self):
        t = self.peek()
        if t in ("typealias", "typedef"):
            self.alias()
        elif t in ("trace", "env", "clock", "stream", "event", "callsite"):
            self.take()
            body = self.block()
            self.take(";")
            if t == "trace":
                if self.trace is not None:
                    raise CtfError("metadata: two trace blocks")
                self.trace = body
            elif t == "clock":
                self.clocks[body["name"]] = {
                    "freq": number(body.get("freq", "1000000000"), "clock freq"),
                    "offset_s": number(body.get("offset_s", "0"), "clock offset_s"),
                    "offset": number(body.get("offset", "0"), "clock offset"),
                }
            elif t == "stream":
                self.streams[number(body.get("id", "0"), "stream id")] = body
            elif t == "event":
                key = (number(body.get("stream_id", "0"), "event stream_id"), number(body.get("id", "0"), "event id"))
                if key in self.events:
                    raise CtfError(f"metadata: two event classes with stream id {key[0]} and id {key[1]}")
                self.events[key] = body
        else:
            raise CtfError(f"metadata: unexpected {t!r} at the top level")

    def alias(self):
        kind = self.take()
        ty = self.type_spec()
        if kind == "typealias":
            self.take(":=")
        name = []
        while self.peek() != ";":
            name.append(self.take())
        self.take(";")
        self.aliases[" ".join(name)] = ty

    def attrs(self):
        """`{ key = value; ... }` of a type (the values as text)."""
        self.take("{")
        out = {}
        while self.peek() != "}":
            key = self.take()
            self.take("=")
            val = []
            while self.peek() != ";":
                val.append(self.take())
            self.take(";")
            out[key] = unquote(val[0]) if len(val) == 1 and val[0].startswith('"') else " ".join(val)
        self.take("}")
        return out

    def block(self):
        """A trace, clock, stream or event block: `key = value;` and `key := type;`."""
        self.take("{")
        out = {}
        while self.peek() != "}":
            if self.peek() in ("typealias", "typedef"):
                self.alias()
                continue
            key = self.take()
            op = self.take()
            if op == ":=":
                out[key] = self.type_spec()
            elif op == "=":
                val = []
                while self.peek() != ";":
                    val.append(self.take())
                out[key] = unquote(val[0]) if len(val) == 1 and val[0].startswith('"') else " ".join(val)
            else:
                raise CtfError(f"metadata: expected = or := after {key!r}, found {op!r}")
            self.take(";")
        self.take("}")
        return out

    def type_spec(self):
        t = self.take()
        if t == "integer":
            return Int(self.attrs())
        if t == "floating_point":
            return Float(self.attrs())
        if t == "string":
            return String(self.attrs() if self.peek() == "{" else {})
        if t == "struct":
            if self.peek() not in ("{",):
                raise CtfError("metadata: named structures are not read")
            self.take("{")
            fields = []
            while self.peek() != "}":
                fty = self.type_spec()
                name = self.take()
                if self.peek() == "[":
                    self.take("[")
                    fty = Array(fty, number(self.take(), f"length of {name}"))
                    self.take("]")
                self.take(";")
                fields.append((name, fty))
            self.take("}")
            align = 1
            if self.peek() == "align":
                self.take()
                self.take("(")
                align = number(self.take(), "struct align") * 8
                self.take(")")
            return Struct(fields, align)
        # An alias, possibly of several words ("unsigned int").
        name = [t]
        while " ".join(name) not in self.aliases and self.peek() not in (None, ";", "}", ":=", "["):
            name.append(self.take())
        if " ".join(name) not in self.aliases:
            raise CtfError(f"metadata: unknown type {' '.join(name)!r}")
        return self.aliases[" ".join(name)]


class Packet:
    """A cursor over one packet of a stream file (bit positions from its start)."""

    def __init__(self, data, start, meta, clocks, where):
        self.data, self.start, self.meta, self.clocks, self.where = data, start, meta, clocks, where
        self.bit = 0
        self.limit = (len(data) - start) * 8

    def fail(self, what):
        raise CtfError(f"{self.where}, packet at byte {self.start}, bit {self.bit}: {what}")

    def align(self, a):
        self.bit = (self.bit + a - 1) // a * a

    def take_bytes(self, n):
        if self.bit + 8 * n > self.limit:
            self.fail(f"{n} bytes past the end ({self.limit // 8} bytes left in it)")
        at = self.start + self.bit // 8
        self.bit += 8 * n
        return self.data[at : at + n]

    def read(self, ty):
        self.align(ty.align)
        if isinstance(ty, Int):
            order = {"le": "<", "be": ">", "network": ">", None: self.meta.byte_order}.get(ty.byte_order, self.meta.byte_order)
            raw = self.take_bytes(ty.size // 8)
            v = int.from_bytes(raw, "little" if order == "<" else "big", signed=ty.signed)
            if ty.map is not None:
                self.clock_update(ty.map.split(".")[1], v, ty.size)
            return v
        if isinstance(ty, Float):
            order = {"le": "<", "be": ">", "network": ">", None: self.meta.byte_order}.get(ty.byte_order, self.meta.byte_order)
            return struct.unpack(order + ("d" if ty.size == 64 else "f"), self.take_bytes(ty.size // 8))[0]
        if isinstance(ty, String):
            at = self.start + self.bit // 8
            end = self.data.find(b"\0", at, self.start + self.limit // 8)
            if end < 0:
                self.fail("a string without its terminating NUL")
            raw = self.data[at:end]
            self.bit += 8 * (end - at + 1)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                self.fail(f"a string that is not UTF-8: {e}")
            return unescape(text, self) if self.meta.escaped_strings else text
        if isinstance(ty, Struct):
            return [(name, self.read(fty), fty) for name, fty in ty.fields]
        if isinstance(ty, Array):
            return [self.read(ty.elem) for _ in range(ty.length)]
        self.fail(f"unknown type {ty!r}")

    def clock_update(self, name, v, size):
        if name not in self.meta.clocks:
            self.fail(f"an integer mapped to clock {name!r}, which the metadata does not declare")
        if size == 64:
            self.clocks[name] = v
        else:
            # CTF 1.8 section 8: a narrower value replaces the clock's low bits, and a
            # smaller one than they held means they wrapped once.
            mask = (1 << size) - 1
            prev = self.clocks.get(name, 0)
            new = (prev & ~mask) | v
            if v < prev & mask:
                new += 1 << size
            self.clocks[name] = new


def unescape(text, packet):
    """ringtrace's escaping of CTF strings undone: `\\\\` a backslash, `\\0` a NUL."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] != "\\":
            out.append(text[i])
            i += 1
        elif text[i + 1 : i + 2] == "\\":
            out.append("\\")
            i += 2
        elif text[i + 1 : i + 2] == "0":
            out.append("\0")
            i += 2
        else:
            packet.fail(f"a lone backslash in an escaped string: {text!r}")
    return "".join(out)


def field(values, name):
    for n, v, _ in values:
        if n == name:
            return v
    return None


class Event:
    """An event as read: its class (`name`, `id`), clock value, time (ns since the
    epoch through the clock's offset) and `fields` [(name, value, type)]."""

    def __init__(self, cls_id, name, cycles, wall_ns, fields):
        self.id, self.name, self.cycles, self.wall_ns, self.fields = cls_id, name, cycles, wall_ns, fields


class Lost:
    """`count` events discarded before the packet that follows (a rise of
    `events_discarded` from the stream's previous packet)."""

    def __init__(self, count):
        self.count = count


def rfc3339(ns):
    """As ringtrace writes times: `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, UTC."""
    t = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=ns // 1_000_000_000)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 1_000_000_000:09d}Z"


def read_stream(path, meta):
    """One stream file: (the packet context's `tid` if it has one, [Event | Lost])."""
    data = open(path, "rb").read()
    where = os.path.basename(path)
    items, tid, clocks, discarded, start = [], None, {}, 0, 0
    header = meta.trace.get("packet.header")
    while start < len(data):
        p = Packet(data, start, meta, clocks, where)
        h = p.read(header) if header is not None else []
        if field(h, "magic") is not None and field(h, "magic") != MAGIC:
            p.fail(f"magic {field(h, 'magic'):#x}, not {MAGIC:#x}")
        uuid = field(h, "uuid")
        if uuid is not None and meta.uuid is not None and bytes(uuid) != meta.uuid:
            p.fail(f"trace UUID {bytes(uuid).hex()}, not the metadata's {meta.uuid.hex()}")
        sid = field(h, "stream_id")
        if sid is None:
            if len(meta.streams) != 1:
                p.fail("no stream_id in the packet header, and more than one stream class")
            sid = next(iter(meta.streams))
        if sid not in meta.streams:
            p.fail(f"stream id {sid}, which the metadata does not declare")
        stream = meta.streams[sid]
        ctx = p.read(stream["packet.context"]) if "packet.context" in stream else []
        content, size = field(ctx, "content_size"), field(ctx, "packet_size")
        if size is None:
            size = content if content is not None else (len(data) - start) * 8
        if content is None:
            content = size
        if not (content <= size and size % 8 == 0 and start + size // 8 <= len(data) and p.bit <= content):
            p.fail(f"content_size {content} and packet_size {size} bits do not fit (the file has {len(data) - start} bytes from here)")
        p.limit = content
        this_tid = field(ctx, "tid")
        if this_tid is not None:
            if tid is not None and this_tid != tid:
                p.fail(f"tid {this_tid} in a stream of tid {tid}")
            tid = this_tid
        count = field(ctx, "events_discarded")
        if count is not None:
            if count < discarded:
                p.fail(f"events_discarded fell from {discarded} to {count}")
            if count > discarded:
                items.append(Lost(count - discarded))
            discarded = count
        while p.bit < content:
            eh = p.read(stream["event.header"]) if "event.header" in stream else []
            eid = field(eh, "id")
            if eid is None:
                ids = [k[1] for k in meta.events if k[0] == sid]
                if len(ids) != 1:
                    p.fail(f"no event id in the event header, and stream {sid} has {len(ids)} event classes")
                eid = ids[0]
            cls = meta.events.get((sid, eid))
            if cls is None:
                p.fail(f"event id {eid}, which stream {sid} does not declare")
            if "context" in cls or "event.context" in stream:
                p.fail("event contexts are not read")
            clock_names = [ty.map.split(".")[1] for _, _, ty in eh if isinstance(ty, Int) and ty.map]
            fields = p.read(cls["fields"]) if "fields" in cls else []
            if p.bit > content:
                p.fail(f"event {cls.get('name')!r} ends past content_size ({content} bits)")
            cycles, wall = None, None
            if clock_names:
                c = meta.clocks[clock_names[0]]
                cycles = clocks[clock_names[0]]
                wall = c["offset_s"] * 1_000_000_000 + (c["offset"] + cycles) * 1_000_000_000 // c["freq"]
            items.append(Event(eid, cls.get("name"), cycles, wall, fields))
        start += size // 8
    return tid, items


def read(ctf_dir):
    """The trace in `ctf_dir`: (Metadata, {stream file name: (tid, [Event | Lost])})."""
    raw = open(os.path.join(ctf_dir, "metadata"), "rb").read()
    if raw[:4] in (struct.pack("<I", PACKETIZED_METADATA_MAGIC), struct.pack(">I", PACKETIZED_METADATA_MAGIC)):
        raise CtfError(f"{ctf_dir}/metadata: packetized metadata is not read")
    try:
        meta = Metadata(raw.decode("utf-8"))
    except CtfError as e:
        raise CtfError(f"{ctf_dir}/metadata: {e}") from None
    streams = {}
    for name in sorted(os.listdir(ctf_dir)):
        path = os.path.join(ctf_dir, name)
        if name == "metadata" or name.startswith(".") or not os.path.isfile(path):
            continue
        streams[name] = read_stream(path, meta)
    return meta, streams


def main():
    meta, streams = read(sys.argv[1])
    for name, (tid, items) in streams.items():
        for it in items:
            if isinstance(it, Lost):
                print(json.dumps({"stream": name, "tid": tid, "lost": it.count}))
            else:
                fields = {n: v for n, v, _ in it.fields}
                print(json.dumps({"stream": name, "tid": tid, "time": rfc3339(it.wall_ns), "name": it.name, "fields": fields}))


if __name__ == "__main__":
    main()
