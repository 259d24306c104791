use std::path::Path;

use super::*;
use crate::file::{self, Process};
use crate::wire::{kind, simple_bytes};

fn simple(k: u8, span: u64) -> Vec<u8> {
    let (b, n) = simple_bytes(k, span, None);
    b[..n].to_vec()
}

/// Each record's object lands on that record, whatever shares its time: an
/// undecodable record between two of the same stamp moves nothing. A catalog cut
/// inside a chunk (a write in progress) decodes what it holds.
#[test]
fn decode_json_maps_each_result_to_its_record() {
    let mut catalog = file::encode_chunk(file::chunk::PROCESS, &Process::now().encode());
    catalog.extend_from_slice(&file::encode_chunk(file::chunk::PROCESS, b"cut short")[..14]);
    let mut t = Trace::from_catalog(&catalog, Path::new("catalog")).unwrap();
    assert!(t.process.is_some());
    let (enter, exit) = (simple(kind::ENTER, 5), simple(kind::EXIT, 6));
    let out = t.decode_json(&[(0, 7, &enter), (0, 7, &[0xee, 1]), (0, 7, &exit), (0, 3, &enter)]);
    let span = |r: &Result<String, String>| {
        let v: serde_json::Value = serde_json::from_str(r.as_ref().unwrap()).unwrap();
        (v["span"].as_str().unwrap().to_string(), v["id"].as_str().unwrap().to_string())
    };
    assert_eq!(span(&out[0]), ("enter".into(), "5".into()));
    assert!(out[1].is_err(), "{:?}", out[1]);
    assert_eq!(span(&out[2]), ("exit".into(), "6".into()));
    assert_eq!(span(&out[3]), ("enter".into(), "5".into()));
    assert!(t.is_empty(), "the trace's own records are left as they were");
}

/// A record that stands for two entries (`open`, `done`) is one object, named for
/// the record, and the objects of the records after it land on their own records.
#[test]
fn decode_json_gives_a_folded_record_one_object() {
    let catalog = file::encode_chunk(file::chunk::PROCESS, &Process::now().encode());
    let mut t = Trace::from_catalog(&catalog, Path::new("catalog")).unwrap();
    let mut open = vec![kind::OPEN];
    open.extend_from_slice(&0u32.to_le_bytes());
    open.extend_from_slice(&5u64.to_le_bytes());
    open.extend_from_slice(&0u64.to_le_bytes());
    let (done, exit) = (simple(kind::DONE, 5), simple(kind::EXIT, 6));
    let out = t.decode_json(&[(0, 1, &open), (0, 2, &done), (0, 3, &exit)]);
    let span = |r: &Result<String, String>| {
        let v: serde_json::Value = serde_json::from_str(r.as_ref().unwrap()).unwrap();
        (v["span"].as_str().unwrap().to_string(), v["id"].as_str().unwrap().to_string())
    };
    assert_eq!(out.len(), 3);
    assert_eq!(span(&out[0]), ("open".into(), "5".into()));
    assert_eq!(span(&out[1]), ("done".into(), "5".into()));
    assert_eq!(span(&out[2]), ("exit".into(), "6".into()));
}
