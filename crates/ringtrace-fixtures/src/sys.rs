//! The `bpf(2)` system call: the `union bpf_attr` members this crate uses, and one safe
//! wrapper per command. All of the crate's `unsafe` is here.
//!
//! Layouts follow `include/uapi/linux/bpf.h` (offsets checked against the installed
//! header with `offsetof`). The attr is always zeroed in full and passed with its full
//! size: the kernel requires every byte past the fields a command knows to be zero, and
//! accepts a size larger than its own `union bpf_attr` if the tail is zero.

use std::ffi::CStr;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::asm::Insn;

pub(crate) const BPF_MAP_CREATE: u32 = 0;
pub(crate) const BPF_MAP_LOOKUP_ELEM: u32 = 1;
pub(crate) const BPF_PROG_LOAD: u32 = 5;
pub(crate) const BPF_OBJ_PIN: u32 = 6;
pub(crate) const BPF_PROG_TEST_RUN: u32 = 10;
pub(crate) const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
pub(crate) const BPF_BTF_LOAD: u32 = 18;

pub(crate) const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub(crate) const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub(crate) const BPF_MAP_TYPE_RINGBUF: u32 = 27;
pub(crate) const BPF_MAP_TYPE_USER_RINGBUF: u32 = 31;
pub(crate) const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;

/// `attr.map_create` (`BPF_MAP_CREATE`); later fields (name, BTF, ...) stay zero.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct MapCreateAttr {
    pub map_type: u32,    // 0
    pub key_size: u32,    // 4
    pub value_size: u32,  // 8
    pub max_entries: u32, // 12
    pub map_flags: u32,   // 16
}

/// `attr` for `BPF_MAP_*_ELEM`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct MapElemAttr {
    map_fd: u32, // 0
    _pad: u32,   // 4
    key: u64,    // 8: __aligned_u64 pointer
    value: u64,  // 16: __aligned_u64 pointer
    flags: u64,  // 24
}

/// `attr` for `BPF_OBJ_PIN`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ObjPinAttr {
    pathname: u64,   // 0
    bpf_fd: u32,     // 8
    file_flags: u32, // 12
}

/// `attr.info` (`BPF_OBJ_GET_INFO_BY_FD`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct InfoAttr {
    bpf_fd: u32,   // 0
    info_len: u32, // 4
    info: u64,     // 8
}

/// `attr` for `BPF_PROG_LOAD`, up to the BTF function info; later fields (line info,
/// attach BTF, ...) stay zero.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProgLoadAttr {
    prog_type: u32,          // 0
    insn_cnt: u32,           // 4
    insns: u64,              // 8
    license: u64,            // 16
    log_level: u32,          // 24
    log_size: u32,           // 28
    log_buf: u64,            // 32
    kern_version: u32,       // 40
    prog_flags: u32,         // 44
    prog_name: [u8; 16],     // 48: BPF_OBJ_NAME_LEN
    prog_ifindex: u32,       // 64
    expected_attach: u32,    // 68
    prog_btf_fd: u32,        // 72
    func_info_rec_size: u32, // 76
    func_info: u64,          // 80
    func_info_cnt: u32,      // 88
    _pad: u32,               // 92: line_info_rec_size
}

/// `attr` for `BPF_BTF_LOAD`; later fields (flags, token) stay zero.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct BtfLoadAttr {
    btf: u64,           // 0
    btf_log_buf: u64,   // 8
    btf_size: u32,      // 16
    btf_log_size: u32,  // 20
    btf_log_level: u32, // 24
    _pad: u32,          // 28: btf_flags
}

/// `struct bpf_func_info` (`include/uapi/linux/bpf.h`): the BTF `FUNC` type of the
/// subprogram starting at instruction `insn_off`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FuncInfo {
    pub insn_off: u32,
    pub type_id: u32,
}

/// A program's BTF: the loaded BTF object (`prog_btf_fd`) and one [`FuncInfo`] per
/// subprogram, in instruction order (`func_info`, `func_info_cnt`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProgBtf<'a> {
    pub btf: BorrowedFd<'a>,
    pub func_info: &'a [FuncInfo],
}

/// `attr.test` (`BPF_PROG_TEST_RUN`); ctx, flags, cpu and batch_size stay zero.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct TestRunAttr {
    prog_fd: u32,       // 0
    retval: u32,        // 4
    data_size_in: u32,  // 8
    data_size_out: u32, // 12
    data_in: u64,       // 16
    data_out: u64,      // 24
    repeat: u32,        // 32
    duration: u32,      // 36
}

/// Bytes of the attr passed to the kernel (its own `union bpf_attr` is 144 bytes in 6.x;
/// the tail past what it knows is zero).
const ATTR_WORDS: usize = 20;

/// `union bpf_attr`, restricted to the members above, zero-filled through `raw`. No member
/// has implicit padding, so every byte the kernel reads is initialized.
#[repr(C)]
union Attr {
    map_create: MapCreateAttr,
    map_elem: MapElemAttr,
    obj_pin: ObjPinAttr,
    info: InfoAttr,
    prog_load: ProgLoadAttr,
    btf_load: BtfLoadAttr,
    test: TestRunAttr,
    raw: [u64; ATTR_WORDS],
}

impl Attr {
    fn zeroed() -> Attr {
        Attr { raw: [0; ATTR_WORDS] }
    }
}

/// `struct bpf_map_info`, the fields this crate reads (88 bytes in 6.x; the kernel copies
/// `min(info_len, its size)` bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MapInfo {
    pub map_type: u32,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
}

/// `bpf(cmd, attr, sizeof attr)`. Returns the non-negative result (an fd for the commands
/// that create one).
///
/// # Safety
///
/// Every pointer the command's member of `attr` holds must be valid for the kernel's
/// reads and writes of the sizes the same member (or the object `fd` refers to) implies.
unsafe fn bpf(cmd: u32, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: `attr` is a live, writable, fully initialized buffer of the size passed; the
    // pointers it holds are valid per this function's contract.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd as libc::c_long, attr as *mut Attr, size_of::<Attr>()) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Wraps an fd a successful command returned.
fn owned_fd(fd: i64) -> OwnedFd {
    let fd = i32::try_from(fd).expect("bpf(2) returned an fd outside the int range");
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn raw(fd: BorrowedFd<'_>) -> u32 {
    fd.as_raw_fd() as u32
}

/// `BPF_MAP_CREATE`.
pub(crate) fn map_create(create: MapCreateAttr) -> io::Result<OwnedFd> {
    let mut attr = Attr::zeroed();
    attr.map_create = create;
    // SAFETY: `map_create` holds no pointers.
    unsafe { bpf(BPF_MAP_CREATE, &mut attr) }.map(owned_fd)
}

/// `BPF_OBJ_GET_INFO_BY_FD` on a map.
pub(crate) fn map_info(map: BorrowedFd<'_>) -> io::Result<MapInfo> {
    let mut info = MapInfo::default();
    let mut attr = Attr::zeroed();
    attr.info = InfoAttr { bpf_fd: raw(map), info_len: size_of::<MapInfo>() as u32, info: &raw mut info as u64 };
    // SAFETY: `info` points to `info_len` writable bytes, and the kernel writes at most
    // `info_len` bytes whatever kind of object `map` is (any bytes are valid u32s).
    unsafe { bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }?;
    Ok(info)
}

/// `BPF_MAP_LOOKUP_ELEM` of `key` into `value` in an ARRAY map, after checking both
/// buffers against the map's key and value sizes (the kernel copies exactly those sizes
/// for an ARRAY map; per-CPU maps would copy more, hence the type check).
pub(crate) fn map_lookup_elem(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<()> {
    let info = map_info(map)?;
    if info.map_type != BPF_MAP_TYPE_ARRAY {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("lookup in a map of type {}", info.map_type)));
    }
    if key.len() != info.key_size as usize || value.len() != info.value_size as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "lookup with a {}-byte key and {}-byte value in a map of {}-byte keys and {}-byte values",
                key.len(),
                value.len(),
                info.key_size,
                info.value_size
            ),
        ));
    }
    let mut attr = Attr::zeroed();
    attr.map_elem = MapElemAttr {
        map_fd: raw(map),
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..Default::default()
    };
    // SAFETY: the map is an ARRAY map, from which the kernel reads `key_size` bytes of
    // `key` and writes `value_size` bytes to `value`: the buffers' lengths, checked above.
    unsafe { bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) }?;
    Ok(())
}

/// `BPF_OBJ_PIN` of `fd` at `path` (in a bpffs).
pub(crate) fn obj_pin(fd: BorrowedFd<'_>, path: &CStr) -> io::Result<()> {
    let mut attr = Attr::zeroed();
    attr.obj_pin = ObjPinAttr { pathname: path.as_ptr() as u64, bpf_fd: raw(fd), file_flags: 0 };
    // SAFETY: `pathname` is a NUL-terminated string that outlives the call.
    unsafe { bpf(BPF_OBJ_PIN, &mut attr) }?;
    Ok(())
}

/// `BPF_PROG_LOAD`, with the program's BTF if given and the verifier log in `log` if
/// given (log level 1).
pub(crate) fn prog_load(
    prog_type: u32,
    insns: &[Insn],
    license: &CStr,
    btf: Option<ProgBtf<'_>>,
    log: Option<&mut [u8]>,
) -> io::Result<OwnedFd> {
    let mut load = ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..Default::default()
    };
    if let Some(btf) = btf {
        load.prog_btf_fd = raw(btf.btf);
        load.func_info_rec_size = size_of::<FuncInfo>() as u32;
        load.func_info = btf.func_info.as_ptr() as u64;
        load.func_info_cnt = btf.func_info.len() as u32;
    }
    if let Some(log) = log {
        load.log_level = 1;
        load.log_size = log.len().min(u32::MAX as usize) as u32;
        load.log_buf = log.as_mut_ptr() as u64;
    }
    let mut attr = Attr::zeroed();
    attr.prog_load = load;
    // SAFETY: `insns` is readable for `insn_cnt` 8-byte instructions (`Insn` is the
    // repr(C) `struct bpf_insn`), `license` is NUL-terminated, `func_info` (if set) is
    // readable for `func_info_cnt` records of `func_info_rec_size` bytes (the repr(C)
    // `struct bpf_func_info`), and `log_buf` (if set) is writable for `log_size` bytes;
    // all outlive the call.
    unsafe { bpf(BPF_PROG_LOAD, &mut attr) }.map(owned_fd)
}

/// `BPF_BTF_LOAD` of the raw BTF `blob` (header, types, strings), with the BTF
/// verifier's log in `log` if given (log level 1).
pub(crate) fn btf_load(blob: &[u8], log: Option<&mut [u8]>) -> io::Result<OwnedFd> {
    let mut load = BtfLoadAttr { btf: blob.as_ptr() as u64, btf_size: blob.len() as u32, ..Default::default() };
    if let Some(log) = log {
        load.btf_log_level = 1;
        load.btf_log_size = log.len().min(u32::MAX as usize) as u32;
        load.btf_log_buf = log.as_mut_ptr() as u64;
    }
    let mut attr = Attr::zeroed();
    attr.btf_load = load;
    // SAFETY: `btf` is readable for `btf_size` bytes and `btf_log_buf` (if set) writable
    // for `btf_log_size` bytes; both outlive the call.
    unsafe { bpf(BPF_BTF_LOAD, &mut attr) }.map(owned_fd)
}

/// `BPF_PROG_TEST_RUN` of `prog` `repeat` times on the packet `data_in` (no data out, no
/// context). Returns the last run's return value (`attr.test.retval`).
pub(crate) fn prog_test_run(prog: BorrowedFd<'_>, data_in: &[u8], repeat: u32) -> io::Result<u32> {
    let mut attr = Attr::zeroed();
    attr.test = TestRunAttr {
        prog_fd: raw(prog),
        data_size_in: data_in.len() as u32,
        data_in: data_in.as_ptr() as u64,
        repeat,
        ..Default::default()
    };
    // SAFETY: `data_in` is readable for `data_size_in` bytes; `data_out` is NULL, so the
    // kernel writes back only into `attr` itself.
    unsafe { bpf(BPF_PROG_TEST_RUN, &mut attr) }?;
    // SAFETY: `test` is the member written above; the kernel wrote back only its `retval`
    // and `duration` (and `data_size_out`), all plain integers.
    Ok(unsafe { attr.test.retval })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn layouts_match_uapi() {
        assert_eq!(offset_of!(MapCreateAttr, map_flags), 16);
        assert_eq!(offset_of!(MapElemAttr, key), 8);
        assert_eq!(offset_of!(MapElemAttr, value), 16);
        assert_eq!(offset_of!(ObjPinAttr, bpf_fd), 8);
        assert_eq!(offset_of!(InfoAttr, info), 8);
        assert_eq!(offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(offset_of!(ProgLoadAttr, prog_flags), 44);
        assert_eq!(offset_of!(ProgLoadAttr, prog_btf_fd), 72);
        assert_eq!(offset_of!(ProgLoadAttr, func_info_rec_size), 76);
        assert_eq!(offset_of!(ProgLoadAttr, func_info), 80);
        assert_eq!(offset_of!(ProgLoadAttr, func_info_cnt), 88);
        assert_eq!(offset_of!(BtfLoadAttr, btf_size), 16);
        assert_eq!(offset_of!(BtfLoadAttr, btf_log_level), 24);
        assert_eq!(size_of::<FuncInfo>(), 8);
        assert_eq!(offset_of!(TestRunAttr, data_in), 16);
        assert_eq!(offset_of!(TestRunAttr, repeat), 32);
        assert_eq!(offset_of!(MapInfo, id), 4);
        assert_eq!(size_of::<Attr>(), 160);
        assert_eq!(size_of::<Insn>(), 8);
    }
}
