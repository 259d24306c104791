use proptest::prelude::*;

use super::*;

fn event(values: &[u8]) -> Vec<u8> {
    let mut b = vec![kind::EVENT];
    b.extend_from_slice(&7u32.to_le_bytes());
    b.extend_from_slice(&9u64.to_le_bytes());
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(values);
    b
}

#[test]
fn an_event_with_every_kind_of_value_decodes() {
    let mut v = vec![tag::U64, 0];
    v.extend_from_slice(&5u64.to_le_bytes());
    v.extend_from_slice(&[tag::STR | tag::CUT, 1, 2, 0, b'h', b'i']);
    v.extend_from_slice(&[tag::BOOL, 2, 1]);
    v.extend_from_slice(&[tag::DROPPED, 0, 4, 0]);
    let rec = decode(&event(&v)).unwrap();
    let RawRecord::Event { callsite, span, span_callsite, values, dropped } = rec else { panic!("{rec:?}") };
    assert_eq!((callsite, span, span_callsite, dropped), (7, 9, 3, 4));
    assert_eq!(values[0], RawValue { field: 0, value: Value::U64(5), cut: false });
    assert_eq!(values[1], RawValue { field: 1, value: Value::Str("hi".into()), cut: true });
    assert_eq!(values[2], RawValue { field: 2, value: Value::Bool(true), cut: false });
}

#[test]
fn malformed_records_are_errors() {
    assert_eq!(decode(&[]), Err(WireError::Empty));
    assert_eq!(decode(&[99]), Err(WireError::Kind(99)));
    assert_eq!(decode(&[kind::ENTER, 1, 2]), Err(WireError::Short("span")));
    assert_eq!(decode(&event(&[tag::STR, 0, 9, 0, b'a'])), Err(WireError::Short("text")));
    assert_eq!(decode(&event(&[tag::STR, 0, 1, 0, 0xff])), Err(WireError::Utf8));
    assert_eq!(decode(&event(&[0x3c, 0])), Err(WireError::Tag(0x3c)));
    let mut close = vec![kind::CLOSE];
    close.extend_from_slice(&[0; 9]);
    assert_eq!(decode(&close), Err(WireError::Trailing));
}

proptest! {
    /// Whatever another process wrote into a ring, decoding returns, and never panics.
    #[test]
    fn any_bytes_decode_or_fail_cleanly(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&b);
        let _ = decode(&event(&b));
    }

    /// The check that reading a trace file runs first accepts exactly what decoding
    /// accepts, and finds the same `lost` counts.
    #[test]
    fn check_agrees_with_decode(b in proptest::collection::vec(any::<u8>(), 0..200), as_event in any::<bool>()) {
        let b = if as_event { event(&b) } else { b };
        let lost = |r: RawRecord| if let RawRecord::Lost { count } = r { Some(count) } else { None };
        prop_assert_eq!(check(&b), decode(&b).map(lost));
    }
}
