//! The fleet's Chrome and CTF exports against the docs' model of their values: a
//! proptest draws sequence numbers around 2^53 and the u64 edge, and host, source and
//! payload text with NULs and backslashes. Chrome writes a `seq` beyond 2^53 − 1 as a
//! decimal string (as `decode --format json` writes integers); CTF writes a backslash
//! as `\\` and a NUL as `\0` in every string, which reads back exactly.

use proptest::prelude::*;
use serde_json::Value as Json;

use super::*;
use crate::fleet::Timeline;

/// JavaScript's `Number.MAX_SAFE_INTEGER`.
const SAFE: u64 = (1 << 53) - 1;

/// One entry to export: (host, source, seq, payload text).
type Drawn = (String, String, u64, String);

fn name() -> impl Strategy<Value = String> {
    let c = prop_oneof![Just('\\'), Just('\0'), Just('0'), Just('h'), Just('"'), any::<char>()];
    proptest::collection::vec(c, 1..10).prop_map(String::from_iter)
}

/// Text the exports show as text: no control character.
fn payload_text() -> impl Strategy<Value = String> {
    let c = prop_oneof![Just('\\'), Just('0'), Just('x'), Just('"'), Just('é')];
    proptest::collection::vec(c, 1..20).prop_map(String::from_iter)
}

fn seq() -> impl Strategy<Value = u64> {
    prop_oneof![any::<u64>(), (SAFE - 3..=SAFE + 3), (u64::MAX - 3..=u64::MAX), 0u64..4]
}

fn drawn() -> impl Strategy<Value = Vec<Drawn>> {
    proptest::collection::vec((name(), name(), seq(), payload_text()), 1..5).prop_map(|v| {
        // A host of its own for each entry: one stream each.
        v.into_iter().enumerate().map(|(i, (h, s, q, t))| (format!("{h}#{i}"), s, q, t)).collect()
    })
}

fn entries(d: &[Drawn]) -> Vec<Entry<'_>> {
    d.iter()
        .enumerate()
        .map(|(i, (host, source, seq, text))| Entry {
            host,
            source,
            seq: *seq,
            time_ns: 1_700_000_000_000_000_000 + i as u64,
            payload: text.as_bytes(),
        })
        .collect()
}

fn check_chrome(fleet: &Fleet, d: &[Drawn]) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    chrome(fleet, entries(d), &mut out).unwrap();
    let doc: Json = serde_json::from_slice(&out).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let instants: Vec<&Json> = events.iter().filter(|e| e["ph"] == "i").collect();
    prop_assert_eq!(instants.len(), d.len());
    for (e, (host, _, seq, text)) in instants.iter().zip(d) {
        let got = &e["args"]["seq"];
        if *seq <= SAFE {
            prop_assert_eq!(got.as_u64(), Some(*seq), "{}", got);
        } else {
            prop_assert_eq!(got.as_str().map(str::to_owned), Some(seq.to_string()), "{}", got);
        }
        prop_assert_eq!(e["args"]["text"].as_str(), Some(text.as_str()));
        let named =
            events.iter().any(|m| m["name"] == "process_name" && m["pid"] == e["pid"] && m["args"]["name"] == **host);
        prop_assert!(named, "{} not named", host);
    }
    Ok(())
}

/// Reads a CTF string at `at` and reverses the documented escapes; `Err` where the
/// bytes are not what the encoding writes (a backslash before anything but `\` or `0`).
fn ctf_string(b: &[u8], at: &mut usize) -> Result<String, TestCaseError> {
    let end = *at + b[*at..].iter().position(|&c| c == 0).unwrap();
    let raw = &b[*at..end];
    *at = end + 1;
    let mut out = Vec::new();
    let mut bytes = raw.iter();
    while let Some(&c) = bytes.next() {
        out.push(match (c, bytes.clone().next()) {
            (b'\\', Some(b'\\')) => b'\\',
            (b'\\', Some(b'0')) => 0,
            (b'\\', next) => return Err(TestCaseError::fail(format!("a lone backslash before {next:?} in {raw:?}"))),
            (c, _) => {
                out.push(c);
                continue;
            }
        });
        bytes.next();
    }
    Ok(String::from_utf8(out).unwrap())
}

fn u64_at(b: &[u8], at: &mut usize) -> u64 {
    let x = u64::from_le_bytes(b[*at..*at + 8].try_into().unwrap());
    *at += 8;
    x
}

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check_ctf(fleet: &Fleet, d: &[Drawn]) -> Result<(), TestCaseError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = Dir(std::env::temp_dir().join(format!("ringtrace-export-values-{}-{n}", std::process::id())));
    ctf(fleet, entries(d), &tmp.0).unwrap();
    let mut seen = 0;
    for f in std::fs::read_dir(&tmp.0).unwrap() {
        let path = f.unwrap().path();
        if !path.file_name().unwrap().to_str().unwrap().starts_with("stream-") {
            continue;
        }
        let b = std::fs::read(&path).unwrap();
        // Magic, stream id; begin, end, content size, packet size; pid, tid; the names.
        let mut at = 4 + 4 + 8 * 4 + 4 + 4;
        let host = ctf_string(&b, &mut at)?;
        let source = ctf_string(&b, &mut at)?;
        let Some((_, want_source, seq, text)) = d.iter().find(|e| e.0 == host) else {
            return Err(TestCaseError::fail(format!("a stream of host {host:?}, which none of {d:?} is")));
        };
        prop_assert_eq!(&source, want_source);
        at += 4 + 8; // event header: class id, timestamp
        prop_assert_eq!(u64_at(&b, &mut at), *seq);
        prop_assert_eq!(u64_at(&b, &mut at), text.len() as u64);
        at += 8; // time_ns
        ctf_string(&b, &mut at)?; // head
        prop_assert_eq!(&ctf_string(&b, &mut at)?, text);
        prop_assert_eq!(at, b.len());
        seen += 1;
    }
    prop_assert_eq!(seen, d.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn chrome_writes_values_as_documented(d in drawn()) {
        check_chrome(&Timeline::new().finish(), &d)?;
    }

    #[test]
    fn ctf_writes_values_as_documented(d in drawn()) {
        check_ctf(&Timeline::new().finish(), &d)?;
    }
}
