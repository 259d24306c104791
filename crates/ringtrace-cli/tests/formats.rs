//! docs/formats.md, the page of every byte layout, says what the code writes: each
//! format's magic and version against the crates' constants (or, where a version is
//! not public, the bytes an encoder writes), and the ring file's field offsets against
//! `ringtrace::format::offsets`.

use std::path::PathBuf;

use ringtrace::format::{channel, control, offsets, snapshot};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn page() -> String {
    std::fs::read_to_string(repo().join("docs/formats.md")).expect("docs/formats.md")
}

/// The cells of a Markdown table row (`| a | b |`), trimmed.
fn cells(line: &str) -> Vec<&str> {
    line.trim().trim_matches('|').split('|').map(str::trim).collect()
}

/// The bytes of a Rust byte string literal in backquotes: `` `b"RT\0\x01"` ``.
fn byte_literal(cell: &str) -> Vec<u8> {
    let inner = cell
        .strip_prefix("`b\"")
        .and_then(|c| c.strip_suffix("\"`"))
        .unwrap_or_else(|| panic!("not a byte string literal: {cell}"));
    let (mut out, mut chars) = (Vec::new(), inner.chars());
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(u8::try_from(c).expect("ASCII"));
            continue;
        }
        match chars.next() {
            Some('0') => out.push(0),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(u8::from_str_radix(&hex, 16).expect("two hex digits"));
            }
            other => panic!("unknown escape \\{other:?} in {cell}"),
        }
    }
    out
}

/// The summary table's rows: format name, magic bytes, version.
fn summary() -> Vec<(String, Vec<u8>, u32)> {
    let text = page();
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("| format | magic") {
            in_table = true;
            continue;
        }
        if in_table && !line.starts_with('|') {
            break;
        }
        if in_table && !line.starts_with("|---") {
            let c = cells(line);
            rows.push((c[0].to_owned(), byte_literal(c[1]), c[2].parse().expect("a version number")));
        }
    }
    rows
}

/// The version an encoder wrote: the little-endian `u32` at byte 8.
fn version_at_8(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[8..12].try_into().unwrap())
}

#[test]
fn every_magic_and_version_on_the_page_is_the_codes() {
    let state = ringtrace_ship::state::State::default().encode();
    let spool = ringtrace_ship::spool::SpoolRound { host: "h".into(), serial: 1, parts: Vec::new() }.encode();
    let code: Vec<(&str, Vec<u8>, u32)> = vec![
        ("ring file", control::MAGIC.to_le_bytes().to_vec(), control::LAYOUT_VERSION),
        ("channel file", channel::CHANNEL_MAGIC.to_le_bytes().to_vec(), channel::CHANNEL_VERSION),
        ("snapshot file", snapshot::SNAPSHOT_MAGIC.to_vec(), snapshot::SNAPSHOT_VERSION),
        ("trace file", ringtrace_tracing::TRACE_MAGIC.to_vec(), ringtrace_tracing::TRACE_VERSION),
        ("Kafka batch", ringtrace_ship::frame::MAGIC.to_vec(), u32::from(ringtrace_ship::frame::VERSION)),
        ("agent state file", state[..8].to_vec(), version_at_8(&state)),
        ("spool file", spool[..8].to_vec(), version_at_8(&spool)),
    ];
    assert_eq!(ringtrace_ship::state::MAGIC.as_slice(), &state[..8]);
    assert_eq!(ringtrace_ship::spool::MAGIC.as_slice(), &spool[..8]);
    let documented = summary();
    let names: Vec<&str> = documented.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, code.iter().map(|(n, _, _)| *n).collect::<Vec<_>>(), "the formats the page lists");
    for ((name, magic, version), (_, want_magic, want_version)) in documented.iter().zip(&code) {
        assert_eq!(magic, want_magic, "docs/formats.md: the {name}'s magic");
        assert_eq!(version, want_version, "docs/formats.md: the {name}'s version");
        // Its own section says the same.
        let literal = format!("`b\"{}\"`", magic.escape_ascii().to_string().replace("\\x00", "\\0"));
        assert!(
            page().matches(&literal).count() >= 2,
            "docs/formats.md: the {name}'s section does not give its magic {literal}"
        );
    }
}

#[test]
fn the_ring_file_offsets_on_the_page_are_the_layouts() {
    let want = [
        ("meta.magic", offsets::MAGIC_AT),
        ("meta.version", offsets::VERSION_AT),
        ("meta.kind", offsets::KIND_AT),
        ("meta.mode", offsets::MODE_AT),
        ("meta.creator_pid", offsets::CREATOR_PID_AT),
        ("meta.capacity", offsets::CAPACITY_AT),
        ("meta.data_offset", offsets::DATA_OFFSET_AT),
        ("meta.watermark", offsets::WATERMARK_AT),
        ("meta.flags", offsets::FLAGS_AT),
        ("meta.clock", offsets::CLOCK_AT),
        ("meta.created_ns", offsets::CREATED_NS_AT),
        ("meta.retire_ahead", offsets::RETIRE_AHEAD_AT),
        ("producer.pos", offsets::PRODUCER_POS_AT),
        ("producer.attached", offsets::PRODUCER_ATTACHED_AT),
        ("consumer.pos", offsets::CONSUMER_POS_AT),
        ("consumer.attached", offsets::CONSUMER_ATTACHED_AT),
        ("consumer.read", offsets::CONSUMER_READ_AT),
        ("consumer.consumed", offsets::CONSUMED_AT),
        ("consumer.skipped", offsets::SKIPPED_AT),
        ("consumer.overwritten", offsets::OVERWRITTEN_AT),
        ("consumer.dead", offsets::DEAD_AT),
        ("overwrite.over_pos", offsets::OVER_POS_AT),
        ("overwrite.retired", offsets::RETIRED_AT),
        ("overwrite.zeroed", offsets::ZEROED_AT),
        ("overwrite.lock_pid", offsets::LOCK_PID_AT),
        ("overflow", offsets::OVERFLOW_AT),
        ("slots", offsets::SLOTS_AT),
    ];
    let text = page();
    let rows: Vec<Vec<&str>> = text.lines().filter(|l| l.starts_with("| ")).map(cells).collect();
    for (field, at) in want {
        let name = format!("`{field}`");
        let row = rows
            .iter()
            .find(|r| r.len() >= 3 && r[2] == name)
            .unwrap_or_else(|| panic!("docs/formats.md: no row for the ring file's {name}"));
        assert_eq!(row[0].parse::<usize>().ok(), Some(at), "docs/formats.md: the offset of {name}");
    }
    // The counters: offsets within a slot's line.
    for (field, at) in [
        ("`owner`", offsets::OWNER_AT),
        ("`committed`", offsets::COMMITTED_AT),
        ("`discarded`", offsets::DISCARDED_AT),
        ("`lost`", offsets::LOST_AT),
        ("`paused`", offsets::PAUSED_AT),
        ("`too_large`", offsets::TOO_LARGE_AT),
    ] {
        let said = text.split(field).nth(1).and_then(|rest| {
            let rest = rest.trim_start_matches(|c: char| !c.is_ascii_digit() && c != '\n');
            rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<usize>().ok()
        });
        assert_eq!(said, Some(at), "docs/formats.md: the counter {field}'s offset in its line");
    }
    assert_eq!(offsets::N_COUNTER_SLOTS, 58, "docs/formats.md gives 58 slots");
    assert!(text.contains(&format!("A control block of {} bytes", control::CONTROL_SIZE)));
}

#[test]
fn the_design_pages_link_to_the_formats_page() {
    for doc in ["docs/tracing.md", "docs/design/shm.md", "docs/design/channel.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        assert!(text.contains("formats.md"), "{doc} does not link to docs/formats.md");
    }
    for module in [
        "crates/ringtrace/src/format/mod.rs",
        "crates/ringtrace/src/format/control.rs",
        "crates/ringtrace/src/format/channel.rs",
        "crates/ringtrace/src/format/snapshot.rs",
        "crates/ringtrace-tracing/src/file.rs",
        "crates/ringtrace-tracing/src/wire.rs",
        "crates/ringtrace-tracing/src/catalog.rs",
    ] {
        let text = std::fs::read_to_string(repo().join(module)).unwrap();
        assert!(text.contains("docs/formats.md"), "{module}'s documentation does not point at docs/formats.md");
    }
}
