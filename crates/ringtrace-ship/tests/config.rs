//! `ship --config FILE`: an agent configured by a TOML file, its sources a directory of
//! ring files named relative to the file, delivers every record; a mistake in the file
//! stops it before it reads anything, with the key named.

mod common;

use std::process::{Command, Stdio};

use common::*;

#[test]
fn an_agent_configured_by_a_file_ships_a_directory_of_rings() {
    let Some(brokers) = brokers() else { return };
    let topic = create_topic(&brokers, "config", 2);
    let dir = TempDir::new("config");
    std::fs::create_dir(dir.path().join("rings")).unwrap();
    let rings: Vec<_> = (0..2).map(|s| dir.path().join(format!("rings/s{s}.ring"))).collect();
    let producers: Vec<_> = rings.iter().map(|p| ring_producer(p, 1 << 18)).collect();
    let file = dir.path().join("agent.toml");
    std::fs::write(
        &file,
        format!(
            "brokers = \"{brokers}\"\ntopic = \"{topic}\"\nhost = \"cfg-host\"\nstate = \"agent.state\"\n\
             sources = [\"rings\"]\ncompression = \"zstd\"\n"
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ringtrace-ship"))
        .args(["ship", "--until-disconnected", "--config"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let writers = (producers.into_iter().enumerate())
        .map(|(s, p)| std::thread::spawn(move || write_records(p, 9, s as u32, 0..20_000)))
        .collect();
    let (fleet, report) = finish(writers, child, &brokers, &topic);
    assert!(report.contains("shipped=40000"), "{report}");
    assert!(dir.path().join("agent.state").is_file(), "the state file is the config file's neighbour");
    for (s, ring) in rings.iter().enumerate() {
        check_source(&fleet, "cfg-host", &ring.display().to_string(), 9, s as u32, 0..20_000);
    }
}

#[test]
fn a_mistake_in_the_file_is_named_before_anything_is_read() {
    let dir = TempDir::new("config-bad");
    let file = dir.path().join("agent.toml");
    for (text, says) in [
        ("brokers = \"b:1\"\ntopik = \"t\"\n", "unknown field `topik`"),
        ("brokers = \"b:1\"\ntopic = \"t\"\nhost = \"h\"\nstate = \"s\"\n", "a ring"),
        ("max_message = 12\n", "--to kafka://BROKERS/TOPIC"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_ringtrace-ship"))
            .args(["ship", "--config"])
            .arg(&file)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{text:?}: {err}");
        assert!(err.contains(says), "{text:?}: {err}");
    }
}

/// A topic the cluster does not have (it creates none by itself) is named at once, not
/// waited on for the acknowledgement timeout round after round.
#[test]
fn a_topic_the_cluster_does_not_have_is_named_at_once() {
    let Some(brokers) = brokers() else { return };
    let dir = TempDir::new("no-topic");
    let ring = dir.path().join("r.ring");
    let _p = ring_producer(&ring, 1 << 16);
    let started = std::time::Instant::now();
    let child = agent(&brokers, "ringtrace-test-no-such-topic", "h", &dir.path().join("s"), &[ring])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Fails (kills the agent) if it is still waiting after 20 s.
    let out = wait_output(child, std::time::Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("ringtrace-test-no-such-topic") && err.contains("does not exist"), "{err}");
    eprintln!("named in {:?}: {err}", started.elapsed());
}
