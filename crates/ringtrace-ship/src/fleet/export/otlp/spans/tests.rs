//! The assembler's bounds and what it marks: spans past the bound of spans open go out
//! marked, span events past theirs are given back, links reach closed spans, an id
//! reused at the same nanosecond gets another span id, and ends reach parents.

use opentelemetry_proto::tonic::trace::v1::span;

use super::{Assembler, Start, MAX_HELD_EVENTS, MAX_OPEN};

fn start(id: u64, parent: Option<u64>) -> Start {
    Start { id, parent, name: format!("s{id}"), attributes: Vec::new() }
}

fn marked(s: &opentelemetry_proto::tonic::trace::v1::Span, key: &str) -> bool {
    s.attributes.iter().any(|a| a.key == key)
}

#[test]
fn a_child_goes_out_first_and_its_end_reaches_its_open_parent() {
    let mut a = Assembler::new();
    a.start(0, 9, start(1, None), 10);
    a.start(0, 9, start(2, Some(1)), 20);
    a.touch(0, 9, 2, 50);
    a.close(0, 9, 2, 60);
    assert_eq!(a.out.len(), 1);
    a.end();
    let (child, parent) = (&a.out[0].1, &a.out[1].1);
    assert_eq!((child.end_time_unix_nano, marked(child, "ringtrace.end_unknown")), (60, false));
    assert_eq!((parent.end_time_unix_nano, marked(parent, "ringtrace.end_unknown")), (60, true));
    assert_eq!((child.parent_span_id.as_slice(), &child.trace_id), (parent.span_id.as_slice(), &parent.trace_id));
    assert_eq!((a.made.spans, a.made.end_unknown, a.made.start_unknown), (2, 1, 0));
}

#[test]
fn spans_past_the_bound_go_out_oldest_first_marked() {
    let mut a = Assembler::new();
    for id in 0..MAX_OPEN as u64 + 3 {
        a.start(0, 9, start(id, None), id);
    }
    assert_eq!(a.open.len(), MAX_OPEN);
    let out: Vec<&str> = a.out.iter().map(|(_, s)| s.name.as_str()).collect();
    assert_eq!(out, ["s0", "s1", "s2"]);
    assert!(a.out.iter().all(|(_, s)| marked(s, "ringtrace.end_unknown")));
    // A record of a span gone out starts a span of what is known: `?`, marked.
    a.record(0, 9, 0, [("x", None)], 1 << 40);
    a.close(0, 9, 0, 1 << 41);
    let last = &a.out.last().unwrap().1;
    assert_eq!((last.name.as_str(), marked(last, "ringtrace.start_unknown")), ("?", true));
}

#[test]
fn span_events_past_the_bound_are_given_back() {
    let mut a = Assembler::new();
    a.start(0, 9, start(1, None), 1);
    let ev = |t| span::Event { time_unix_nano: t, name: "e".into(), ..span::Event::default() };
    for t in 0..MAX_HELD_EVENTS as u64 {
        assert!(a.event(0, 9, 1, None, ev(t)).is_ok());
    }
    assert!(a.event(0, 9, 1, None, ev(7)).is_err());
    // Room again once the span went out.
    a.close(0, 9, 1, 2);
    assert!(a.event(0, 9, 2, Some("ctx"), ev(8)).is_ok());
    assert_eq!(a.made.span_events, MAX_HELD_EVENTS as u64 + 1);
    a.end();
    assert_eq!(a.out[1].1.name, "ctx", "named from the event's context");
}

#[test]
fn links_reach_a_closed_span_and_a_reused_id_gets_another_span_id() {
    let mut a = Assembler::new();
    a.start(0, 9, start(1, None), 5);
    a.close(0, 9, 1, 6);
    // The same id at the same nanosecond: the same hash, hashed again.
    a.start(0, 9, start(1, None), 5);
    a.start(0, 9, start(2, None), 7);
    a.follows(0, 9, 2, 1, 8);
    a.end();
    let by_name = |n: u64| a.out.iter().filter(|(_, s)| s.name == format!("s{n}")).map(|(_, s)| s).collect::<Vec<_>>();
    let (ones, two) = (by_name(1), by_name(2)[0]);
    assert_ne!(ones[0].span_id, ones[1].span_id);
    assert_eq!(two.links.len(), 1);
    assert_eq!(two.links[0].span_id, ones[1].span_id, "the span of the id as it is now");
    // Another source's span 1 is not linked.
    a.start(1, 8, start(3, None), 9);
    a.follows(1, 8, 3, 1, 10);
    a.end();
    assert!(a.out.last().unwrap().1.links.is_empty());
}
