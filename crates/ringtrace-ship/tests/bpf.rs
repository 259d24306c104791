//! A BPF ring buffer map shipped into a real Kafka cluster: a socket filter
//! (ringtrace-fixtures, run with `BPF_PROG_TEST_RUN`) writes numbered records into the
//! map, agents named `bpf-id:N` drain it, killed mid-run and restarted: every record is
//! read back once, in order, under the sequence number of its place in the map.
//!
//! The cluster is the test command's (see `fleet.rs`); BPF needs root (skipped with a
//! message without it, unless `RINGTRACE_REQUIRE` lists `bpf`).

mod common;

use std::os::fd::AsFd;
use std::time::Duration;

use common::*;
use ringtrace_fixtures::{expected_payload, have_bpf, ProgSpec, RingMap, SeqProgram};

#[test]
fn a_bpf_map_is_shipped_exactly_once_across_agents_killed_mid_run() {
    let Some(brokers) = brokers() else { return };
    if !have_bpf() {
        return;
    }
    // 16 MiB holds all 150,000 records of 72 bytes: the agents hold what they have not
    // shipped, and nothing is dropped.
    let n = 150_000u32;
    let map = RingMap::create(1 << 24).expect("ring buffer map");
    let prog = SeqProgram::load(map.as_fd(), ProgSpec { payload: 64, ..Default::default() }).expect("program");
    let spec = format!("bpf-id:{}", map.id().unwrap());
    let topic = create_topic(&brokers, "bpf", 1);
    let dir = TempDir::new("bpf");
    let state = dir.path().join("agent.state");
    let sources = [std::path::PathBuf::from(&spec)];
    // Records arrive while agents run and are killed: a third first, the rest between.
    prog.run(n / 3).unwrap();
    let kills = kill_mid_run(&state, &[0, 300, 1_500], || {
        prog.run(n / 9).unwrap();
        agent(&brokers, &topic, "host5", &state, &sources).spawn().unwrap()
    });
    let done = prog.counters().unwrap().attempts;
    prog.run(n - u32::try_from(done).unwrap()).unwrap();
    let counters = prog.counters().unwrap();
    assert_eq!((counters.attempts, counters.drops), (u64::from(n), 0));
    let out =
        wait_output(agent(&brokers, &topic, "host5", &state, &sources).spawn().unwrap(), Duration::from_secs(300));
    assert!(out.status.success(), "the agent exited with {}", out.status);
    let fleet = read_all(&brokers, &topic);
    let stats = fleet.stats();
    eprintln!("killed {kills} time(s); read back: {stats:?}");
    assert!(kills >= 1, "an agent was killed while it ran");
    assert_eq!((stats.damaged, stats.missing), (0, 0));
    assert_eq!(stats.records, u64::from(n));
    let seqs: Vec<u64> = fleet
        .source("host5", &spec)
        .map(|e| {
            assert_eq!(e.payload, expected_payload(e.seq, 64), "seq {} carries another record", e.seq);
            e.seq
        })
        .collect();
    assert_eq!(seqs, (0..u64::from(n)).collect::<Vec<_>>());
}
