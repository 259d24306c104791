//! A tiny eBPF assembler: the instructions [`crate::prog`] needs, and forward jumps patched
//! by [`Asm::bind`] instead of hand-counted offsets.
//!
//! Encoding per `Documentation/bpf/standardization/instruction-set.rst`: one 8-byte
//! `struct bpf_insn { u8 code; u8 dst_reg:4, src_reg:4; s16 off; s32 imm; }` (dst in the
//! low nibble on little-endian hosts), two slots for the 64-bit immediate load.

// Instruction classes.
const BPF_LD: u8 = 0x00;
const BPF_ST: u8 = 0x02;
const BPF_STX: u8 = 0x03;
const BPF_ALU: u8 = 0x04;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;

// Sizes and modes of loads and stores.
pub(crate) const BPF_W: u8 = 0x00;
pub(crate) const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_ATOMIC: u8 = 0xc0;

// Operand source.
const BPF_K: u8 = 0x00;
const BPF_X: u8 = 0x08;

// ALU operations.
pub(crate) const BPF_ADD: u8 = 0x00;
pub(crate) const BPF_OR: u8 = 0x40;
pub(crate) const BPF_LSH: u8 = 0x60;
pub(crate) const BPF_RSH: u8 = 0x70;
pub(crate) const BPF_MOD: u8 = 0x90;
pub(crate) const BPF_XOR: u8 = 0xa0;
const BPF_MOV: u8 = 0xb0;

// Jump operations.
const BPF_JA: u8 = 0x00;
pub(crate) const BPF_JGT: u8 = 0x20;
pub(crate) const BPF_JNE: u8 = 0x50;
pub(crate) const BPF_JSGE: u8 = 0x70;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

/// `imm` flag of a `BPF_ATOMIC` add: also load the old value into `src`.
pub(crate) const BPF_FETCH: i32 = 0x01;

/// `src_reg` of a 64-bit immediate load whose `imm` is a map fd.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `src_reg` of a 64-bit immediate load whose `imm` is the offset of a subprogram (from
/// the instruction after the load's first slot): the address of a callback.
const BPF_PSEUDO_FUNC: u8 = 4;

/// A register, r0..=r10.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reg(u8);

/// Return value and helper return.
pub(crate) const R0: Reg = Reg(0);
/// Helper arguments 1..=5 (clobbered by calls).
pub(crate) const R1: Reg = Reg(1);
pub(crate) const R2: Reg = Reg(2);
pub(crate) const R3: Reg = Reg(3);
pub(crate) const R4: Reg = Reg(4);
pub(crate) const R5: Reg = Reg(5);
/// Callee-saved.
pub(crate) const R6: Reg = Reg(6);
pub(crate) const R7: Reg = Reg(7);
pub(crate) const R8: Reg = Reg(8);
pub(crate) const R9: Reg = Reg(9);
/// Read-only frame pointer.
pub(crate) const R10: Reg = Reg(10);

/// `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        let regs = if cfg!(target_endian = "little") { src.0 << 4 | dst.0 } else { dst.0 << 4 | src.0 };
        Insn { code, regs, off, imm }
    }
}

/// A forward jump waiting for its target.
#[must_use = "a jump must be bound to its target"]
#[derive(Debug)]
pub(crate) struct Fixup(usize);

/// A `BPF_PSEUDO_FUNC` load waiting for its subprogram.
#[must_use = "a function address must be bound to its subprogram"]
#[derive(Debug)]
pub(crate) struct FuncFixup(usize);

/// An instruction buffer.
#[derive(Debug, Default)]
pub(crate) struct Asm {
    insns: Vec<Insn>,
}

impl Asm {
    pub(crate) fn new() -> Asm {
        Asm::default()
    }

    pub(crate) fn finish(self) -> Vec<Insn> {
        self.insns
    }

    /// The index of the next instruction emitted (a subprogram's `insn_off` in its
    /// `struct bpf_func_info`).
    pub(crate) fn len(&self) -> usize {
        self.insns.len()
    }

    fn push(&mut self, insn: Insn) -> &mut Self {
        self.insns.push(insn);
        self
    }

    /// `dst = imm` (64-bit, imm sign-extended).
    pub(crate) fn mov64_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.push(Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, dst, R0, 0, imm))
    }

    /// `dst = imm as u32` (32-bit move: the upper half is zeroed, no sign extension).
    pub(crate) fn mov32_imm(&mut self, dst: Reg, imm: u32) -> &mut Self {
        self.push(Insn::new(BPF_ALU | BPF_MOV | BPF_K, dst, R0, 0, imm as i32))
    }

    /// `dst = src` (64-bit).
    pub(crate) fn mov64_reg(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.push(Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0))
    }

    /// `dst op= imm` (64-bit, imm sign-extended).
    pub(crate) fn alu64_imm(&mut self, op: u8, dst: Reg, imm: i32) -> &mut Self {
        self.push(Insn::new(BPF_ALU64 | op | BPF_K, dst, R0, 0, imm))
    }

    /// `dst op= src` (64-bit; `BPF_MOD` unsigned).
    pub(crate) fn alu64_reg(&mut self, op: u8, dst: Reg, src: Reg) -> &mut Self {
        self.push(Insn::new(BPF_ALU64 | op | BPF_X, dst, src, 0, 0))
    }

    /// `dst = imm` (64-bit immediate, two slots).
    pub(crate) fn ld_imm64(&mut self, dst: Reg, imm: u64) -> &mut Self {
        self.push(Insn::new(BPF_LD | BPF_DW | BPF_IMM, dst, R0, 0, imm as u32 as i32));
        self.push(Insn::new(0, R0, R0, 0, (imm >> 32) as u32 as i32))
    }

    /// `dst = &map` for the map `fd` (the kernel rewrites the fd into the map's address).
    pub(crate) fn ld_map_fd(&mut self, dst: Reg, fd: i32) -> &mut Self {
        self.push(Insn::new(BPF_LD | BPF_DW | BPF_IMM, dst, Reg(BPF_PSEUDO_MAP_FD), 0, fd));
        self.push(Insn::new(0, R0, R0, 0, 0))
    }

    /// `dst = &subprogram` (a callback for a helper such as `bpf_user_ringbuf_drain`), the
    /// subprogram starting where [`Asm::bind_func`] is called.
    pub(crate) fn ld_func(&mut self, dst: Reg) -> FuncFixup {
        self.push(Insn::new(BPF_LD | BPF_DW | BPF_IMM, dst, Reg(BPF_PSEUDO_FUNC), 0, 0));
        self.push(Insn::new(0, R0, R0, 0, 0));
        FuncFixup(self.insns.len() - 2)
    }

    /// Makes `load` point at the next instruction emitted: the first of a subprogram.
    pub(crate) fn bind_func(&mut self, load: FuncFixup) {
        let off = self.insns.len() - load.0 - 1;
        self.insns[load.0].imm = i32::try_from(off).expect("subprogram beyond the 32-bit offset range");
    }

    /// `*(size *)(dst + off) = imm`.
    pub(crate) fn st_imm(&mut self, size: u8, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.push(Insn::new(BPF_ST | BPF_MEM | size, dst, R0, off, imm))
    }

    /// `*(size *)(dst + off) = src`.
    pub(crate) fn stx(&mut self, size: u8, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(Insn::new(BPF_STX | BPF_MEM | size, dst, src, off, 0))
    }

    /// Atomic `*(size *)(dst + off) op= src`; with `BPF_FETCH` in `op`, `src` receives the
    /// old value.
    pub(crate) fn atomic(&mut self, size: u8, dst: Reg, off: i16, src: Reg, op: i32) -> &mut Self {
        self.push(Insn::new(BPF_STX | BPF_ATOMIC | size, dst, src, off, op))
    }

    /// Calls helper `id` (arguments r1..=r5, result r0, r1..=r5 clobbered).
    pub(crate) fn call(&mut self, id: i32) -> &mut Self {
        self.push(Insn::new(BPF_JMP | BPF_CALL, R0, R0, 0, id))
    }

    /// `return r0`.
    pub(crate) fn exit(&mut self) -> &mut Self {
        self.push(Insn::new(BPF_JMP | BPF_EXIT, R0, R0, 0, 0))
    }

    /// `if dst op imm goto <bound later>`.
    pub(crate) fn jmp_imm(&mut self, op: u8, dst: Reg, imm: i32) -> Fixup {
        self.push(Insn::new(BPF_JMP | op | BPF_K, dst, R0, 0, imm));
        Fixup(self.insns.len() - 1)
    }

    /// `if dst op src goto <bound later>`.
    pub(crate) fn jmp_reg(&mut self, op: u8, dst: Reg, src: Reg) -> Fixup {
        self.push(Insn::new(BPF_JMP | op | BPF_X, dst, src, 0, 0));
        Fixup(self.insns.len() - 1)
    }

    /// `goto <bound later>`.
    pub(crate) fn ja(&mut self) -> Fixup {
        self.push(Insn::new(BPF_JMP | BPF_JA, R0, R0, 0, 0));
        Fixup(self.insns.len() - 1)
    }

    /// Makes `jump` land on the next instruction emitted (offsets count from the
    /// instruction after the jump).
    pub(crate) fn bind(&mut self, jump: Fixup) {
        let off = self.insns.len() - jump.0 - 1;
        self.insns[jump.0].off = i16::try_from(off).expect("jump beyond the 16-bit offset range");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        let mut a = Asm::new();
        a.mov64_imm(R0, 0).exit();
        let j = a.jmp_imm(BPF_JNE, R0, 0);
        a.mov64_reg(R6, R0);
        a.bind(j);
        a.ld_map_fd(R1, 7);
        let insns = a.finish();
        assert_eq!(insns[0], Insn { code: 0xb7, regs: 0, off: 0, imm: 0 });
        assert_eq!(insns[1], Insn { code: 0x95, regs: 0, off: 0, imm: 0 });
        assert_eq!(insns[2].code, 0x55);
        assert_eq!(insns[2].off, 1);
        if cfg!(target_endian = "little") {
            assert_eq!(insns[3].regs, 0x06);
            assert_eq!(insns[4].regs, 0x11);
        }
        assert_eq!((insns[4].code, insns[4].imm), (0x18, 7));
    }

    #[test]
    fn pseudo_func_offset() {
        let mut a = Asm::new();
        let f = a.ld_func(R2);
        a.exit();
        a.bind_func(f);
        a.mov64_imm(R0, 0).exit();
        let insns = a.finish();
        // The subprogram at 3 = 0 + imm + 1.
        assert_eq!((insns[0].code, insns[0].imm), (0x18, 2));
        if cfg!(target_endian = "little") {
            assert_eq!(insns[0].regs, 0x42);
        }
    }
}
