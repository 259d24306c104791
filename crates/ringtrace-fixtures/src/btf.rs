//! A minimal BTF writer: the few type kinds a hand-assembled program's `func_info` needs
//! (`INT`, `PTR`, `FUNC_PROTO`, `FUNC`), laid out as `BPF_BTF_LOAD` takes them.
//!
//! Encoding per `include/uapi/linux/btf.h` and `Documentation/bpf/btf.rst`: a 24-byte
//! `struct btf_header`, the type section (one `struct btf_type` a type, id 1 upwards, id 0
//! being `void`, each followed by its kind's extra data), then the string section (NUL
//! terminated names, starting with the empty name at offset 0). All in host byte order.

/// `BTF_MAGIC`.
const MAGIC: u16 = 0xEB9F;
/// `BTF_VERSION`.
const VERSION: u8 = 1;
/// `sizeof(struct btf_header)`.
const HEADER_LEN: u32 = 24;

// `BTF_KIND_*`.
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;

/// `BTF_INT_SIGNED`, in an `INT`'s encoding byte.
const INT_SIGNED: u32 = 1;

/// `enum btf_func_linkage`: a `FUNC`'s linkage (its `vlen`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Linkage {
    /// `BTF_FUNC_STATIC`: the only linkage the verifier takes for a callback
    /// (`check_ld_imm`: "callback function not static").
    Static = 0,
    /// `BTF_FUNC_GLOBAL`.
    Global = 1,
}

/// A BTF blob under construction.
#[derive(Debug)]
pub(crate) struct Btf {
    types: Vec<u8>,
    strings: Vec<u8>,
    next_id: u32,
}

impl Btf {
    pub(crate) fn new() -> Btf {
        Btf { types: Vec::new(), strings: vec![0], next_id: 1 }
    }

    /// Adds `name` to the string section; returns its offset.
    fn name(&mut self, name: &str) -> u32 {
        if name.is_empty() {
            return 0;
        }
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        off
    }

    /// Appends `struct btf_type { name_off; info; size_or_type; }` (info: `vlen` in bits
    /// 0..16, kind in bits 24..29) and the kind's extra words; returns the new type's id.
    fn push(&mut self, name: &str, kind: u32, vlen: u32, size_or_type: u32, extra: &[u32]) -> u32 {
        let name_off = self.name(name);
        for word in [name_off, (kind << 24) | vlen, size_or_type].iter().chain(extra) {
            self.types.extend_from_slice(&word.to_ne_bytes());
        }
        self.next_id += 1;
        self.next_id - 1
    }

    /// A signed integer type of `bytes` bytes (`BTF_KIND_INT`, followed by its encoding
    /// word: encoding << 24 | bit offset << 16 | bits).
    pub(crate) fn signed_int(&mut self, name: &str, bytes: u32) -> u32 {
        self.push(name, KIND_INT, 0, bytes, &[(INT_SIGNED << 24) | (bytes * 8)])
    }

    /// A pointer to type `to` (0: `void *`).
    pub(crate) fn ptr(&mut self, to: u32) -> u32 {
        self.push("", KIND_PTR, 0, to, &[])
    }

    /// A function prototype returning `ret` with the named parameters (each followed as a
    /// `struct btf_param { name_off; type; }`).
    pub(crate) fn func_proto(&mut self, ret: u32, params: &[(&str, u32)]) -> u32 {
        let mut extra = Vec::with_capacity(params.len() * 2);
        for &(name, ty) in params {
            extra.push(self.name(name));
            extra.push(ty);
        }
        self.push("", KIND_FUNC_PROTO, params.len() as u32, ret, &extra)
    }

    /// A function `name` of prototype `proto`: what a `struct bpf_func_info` names.
    pub(crate) fn func(&mut self, name: &str, proto: u32, linkage: Linkage) -> u32 {
        self.push(name, KIND_FUNC, linkage as u32, proto, &[])
    }

    /// The blob: `struct btf_header { magic; version; flags; hdr_len; type_off; type_len;
    /// str_off; str_len; }` (offsets from the header's end), types, strings.
    pub(crate) fn finish(self) -> Vec<u8> {
        let type_len = self.types.len() as u32;
        let mut blob = Vec::with_capacity(HEADER_LEN as usize + self.types.len() + self.strings.len());
        blob.extend_from_slice(&MAGIC.to_ne_bytes());
        blob.extend_from_slice(&[VERSION, 0]);
        for word in [HEADER_LEN, 0, type_len, type_len, self.strings.len() as u32] {
            blob.extend_from_slice(&word.to_ne_bytes());
        }
        blob.extend_from_slice(&self.types);
        blob.extend_from_slice(&self.strings);
        blob
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let mut btf = Btf::new();
        let int = btf.signed_int("int", 4);
        let proto = btf.func_proto(int, &[("x", int)]);
        let func = btf.func("f", proto, Linkage::Static);
        assert_eq!((int, proto, func), (1, 2, 3));
        let blob = btf.finish();
        let word = |off: usize| u32::from_ne_bytes(blob[off..off + 4].try_into().unwrap());
        assert_eq!(u16::from_ne_bytes([blob[0], blob[1]]), 0xEB9F);
        // INT 16 bytes, FUNC_PROTO 12 + 8, FUNC 12.
        assert_eq!((word(4), word(8), word(12), word(16), word(20)), (24, 0, 48, 48, 9));
        assert_eq!(word(24 + 4), KIND_INT << 24);
        assert_eq!(word(24 + 12), (INT_SIGNED << 24) | 32);
        assert_eq!(word(24 + 16 + 4), (KIND_FUNC_PROTO << 24) | 1);
        assert_eq!(&blob[24 + 48..], b"\0int\0x\0f\0");
    }
}
