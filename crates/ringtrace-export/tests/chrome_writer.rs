//! The Chrome writer over the record model: each kind of record as the line it writes,
//! and the document a JSON reader reads back.

use ringtrace_export::chrome::Writer;
use ringtrace_export::record::{Plain, Record};
use serde_json::{Map, Value as Json};

fn lines(out: &[u8]) -> Vec<String> {
    std::str::from_utf8(out).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn every_record_kind_is_one_line_of_the_document() {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.put(&Plain::Process { pid: 2, tid: 4, name: "web-1", sort_index: Some(2), category: None }).unwrap();
    w.put(&Plain::Thread { pid: 2, tid: 4, name: "a \"ring\"", sort_index: None, category: Some("") }).unwrap();
    let mut args = Map::new();
    args.insert("n".into(), Json::from(7));
    let r = Record::Begin { ts_ns: 1_000_000_001, pid: 2, tid: 4, span: 9, name: "span", category: "app", args: &args };
    w.put(&r).unwrap();
    let r = Record::Instant { ts_ns: 1_000_000_002, pid: 2, tid: 4, name: "ev", category: "app", args: &args };
    w.put(&r).unwrap();
    w.put(&Plain::End { ts_ns: 1_000_000_003, pid: 2, tid: 4, span: Some(9), unfinished: false }).unwrap();
    w.put(&Plain::End { ts_ns: 1_000_000_004, pid: 2, tid: 4, span: None, unfinished: true }).unwrap();
    w.finish().unwrap();
    assert_eq!(
        lines(&out),
        [
            r#"{"displayTimeUnit":"ns","traceEvents":["#,
            r#"{"ph":"M","name":"process_name","pid":2,"tid":4,"args":{"name":"web-1"}},"#,
            r#"{"ph":"M","name":"process_sort_index","pid":2,"tid":4,"args":{"sort_index":2}},"#,
            r#"{"ph":"M","name":"thread_name","cat":"","pid":2,"tid":4,"args":{"name":"a \"ring\""}},"#,
            r#"{"ph":"B","name":"span","cat":"app","ts":1000000.001,"pid":2,"tid":4,"args":{"n":7}},"#,
            r#"{"ph":"i","s":"t","name":"ev","cat":"app","ts":1000000.002,"pid":2,"tid":4,"args":{"n":7}},"#,
            r#"{"ph":"E","name":"","cat":"","ts":1000000.003,"pid":2,"tid":4},"#,
            r#"{"ph":"E","name":"","cat":"","ts":1000000.004,"pid":2,"tid":4,"args":{"unfinished":true}}"#,
            "]}",
        ]
    );
    let v: Json = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["traceEvents"].as_array().unwrap().len(), 7);
}

#[test]
fn a_document_of_no_records_is_an_empty_list() {
    let mut out = Vec::new();
    Writer::new(&mut out).finish().unwrap();
    let v: Json = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["traceEvents"].as_array().unwrap().len(), 0);
    assert_eq!(v["displayTimeUnit"], "ns");
}
