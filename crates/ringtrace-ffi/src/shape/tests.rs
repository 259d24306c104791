//! A callsite's kind and fields are fixed at its first record in a recorder: records of
//! any shape, through `ringtrace_event` and `ringtrace_span_enter` as the C macros call
//! them, are accepted exactly where they match it (the same count, and each field the
//! same type and a name of the same bytes, at the same address or not) and the
//! function's kind is the callsite's; any other is refused with -EINVAL and records
//! nothing.

use std::ffi::{c_void, CStr, CString};
use std::ptr;
use std::sync::LazyLock;

use proptest::prelude::*;

use super::slot;
use super::{FIRST_BITS, SEGMENTS};
use crate::callsite::*;
use crate::events::*;
use crate::recorder::*;

/// Names, twice each: the same bytes at two addresses (the copies made at run time).
const NAMES: [&CStr; 3] = [c"a", c"b", c"c"];
static COPIES: LazyLock<Vec<CString>> = LazyLock::new(|| NAMES.iter().map(|&n| n.to_owned()).collect());
const TYPES: [u32; 4] = [RINGTRACE_FIELD_U64, RINGTRACE_FIELD_I64, RINGTRACE_FIELD_STR, RINGTRACE_FIELD_STRN];

/// A field: its name (an index into `NAMES`, `None` for NULL), whether the copy of the
/// name is passed, and its type (an index into `TYPES`).
type FieldSpec = (Option<usize>, bool, usize);

fn field((name, copy, ty): FieldSpec) -> ringtrace_field {
    let name = match name {
        None => ptr::null(),
        Some(i) if copy => COPIES[i].as_ptr(),
        Some(i) => NAMES[i].as_ptr(),
    };
    let r#type = TYPES[ty];
    let (len, value) = match r#type {
        RINGTRACE_FIELD_STR => (0, ringtrace_field_value { p: c"text".as_ptr().cast::<c_void>() }),
        RINGTRACE_FIELD_STRN => (2, ringtrace_field_value { p: c"xy".as_ptr().cast::<c_void>() }),
        _ => (0, ringtrace_field_value { u: 7 }),
    };
    ringtrace_field { name, r#type, len, value }
}

/// The same shape: the same count, each field of the same type and a name of the same
/// bytes (NULL matching none).
fn same(first: &[FieldSpec], later: &[FieldSpec]) -> bool {
    first.len() == later.len()
        && first.iter().zip(later).all(|(&(n1, _, t1), &(n2, _, t2))| n1.is_some() && n1 == n2 && t1 == t2)
}

fn written(rec: *const ringtrace_recorder) -> u64 {
    let mut s = ringtrace_recorder_stats::default();
    // SAFETY: a live recorder handle; `s` is valid for a write.
    assert_eq!(unsafe { ringtrace_recorder_get_stats(rec, &mut s) }, 0);
    s.written
}

/// Records `fields` at `cs` with the function for `kind`; whether it was accepted.
fn record(rec: *mut ringtrace_recorder, cs: *mut ringtrace_callsite, kind: u8, fields: &[ringtrace_field]) -> bool {
    let before = written(rec);
    let accepted = if kind == RINGTRACE_CALLSITE_SPAN {
        // SAFETY: a live recorder and callsite; `fields.len()` fields whose strings are
        // NUL-terminated (or, STRN, 2 bytes long).
        let span = unsafe { ringtrace_span_enter(rec, cs, fields.as_ptr(), fields.len()) };
        if span != 0 {
            // SAFETY: a live recorder; the span entered on this thread just now.
            assert_eq!(unsafe { ringtrace_span_exit(rec, span) }, 0);
        }
        span != 0
    } else {
        // SAFETY: as above.
        match unsafe { ringtrace_event(rec, cs, fields.as_ptr(), fields.len()) } {
            0 => true,
            code => {
                assert_eq!(code, -libc::EINVAL);
                false
            }
        }
    };
    // A span is two records (`open`: made and entered; `done`: exited and closed), an
    // event one.
    let records = if kind == RINGTRACE_CALLSITE_SPAN { 2 } else { 1 };
    assert_eq!(written(rec) - before, if accepted { records } else { 0 }, "a refused record was written");
    accepted
}

fn field_spec(nullable: bool) -> impl Strategy<Value = FieldSpec> {
    let name = if nullable {
        prop_oneof![1 => Just(None), 8 => (0..NAMES.len()).prop_map(Some)].boxed()
    } else {
        (0..NAMES.len()).prop_map(Some).boxed()
    };
    (name, any::<bool>(), 0..TYPES.len())
}

fn kind() -> impl Strategy<Value = u8> {
    prop::sample::select(vec![RINGTRACE_CALLSITE_EVENT, RINGTRACE_CALLSITE_SPAN])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_record_is_accepted_exactly_where_it_matches_its_callsites_first_record(
        site_kind in kind(),
        first in prop::collection::vec(field_spec(false), 0..4),
        later in prop::collection::vec(
            (kind(), prop_oneof![
                // The first record's shape again, its names at either address.
                Just(None),
                prop::collection::vec(field_spec(true), 0..4).prop_map(Some),
            ], any::<u64>()),
            1..12,
        ),
    ) {
        let mut rec = ptr::null_mut();
        // SAFETY: NULL directory and options; `rec` is valid for a write.
        prop_assert_eq!(unsafe { ringtrace_recorder_flight(ptr::null(), ptr::null(), &mut rec) }, 0);
        let name = if site_kind == RINGTRACE_CALLSITE_SPAN { c"span_site".as_ptr() } else { ptr::null() };
        // A callsite that lives as long as the program, as the macros' statics do.
        let cs: *mut ringtrace_callsite = Box::leak(Box::new(ringtrace_callsite {
            name,
            target: c"test".as_ptr(),
            file: c"callsite_shapes.rs".as_ptr(),
            line: 1,
            level: RINGTRACE_LEVEL_INFO,
            kind: site_kind,
            reserved: 0,
            interned: 0,
        }));
        let fields: Vec<_> = first.iter().copied().map(field).collect();
        prop_assert!(record(rec, cs, site_kind, &fields), "the first record was refused");
        for (call_kind, shape, seed) in later {
            let spec = shape.unwrap_or_else(|| {
                first.iter().enumerate().map(|(i, &(n, _, t))| (n, seed >> i & 1 == 1, t)).collect()
            });
            let fields: Vec<_> = spec.iter().copied().map(field).collect();
            let want = call_kind == site_kind && same(&first, &spec);
            prop_assert_eq!(record(rec, cs, call_kind, &fields), want, "{:?} after {:?}", spec, first);
        }
        // SAFETY: a live recorder handle no thread uses any more.
        unsafe { ringtrace_recorder_free(rec) };
    }
}

#[test]
fn every_number_has_one_slot() {
    let mut seen = std::collections::HashSet::new();
    for n in (0..5000).chain([u32::MAX - 1, u32::MAX]) {
        let (s, i) = slot(n);
        assert!(s < SEGMENTS && i < 1 << (s + FIRST_BITS as usize), "{n}: {s} {i}");
        assert!(seen.insert((s, i)), "{n}");
    }
    assert_eq!(slot(0), (0, 0));
    assert_eq!(slot(63), (0, 63));
    assert_eq!(slot(64), (1, 0));
}
