//! Two processes, one ring: this program creates a ring file and writes into it; a
//! second process (this same program, started again with the argument `consumer`)
//! attaches to the file by its path and reads the records.
//!
//! Run: `cargo run --release -p ringtrace --example two_processes`
//!
//! In your own programs the two sides are usually different programs: a traced
//! application that creates the ring (`Builder::create`) and a tool that opens it
//! (`open_with(path, Access::Consumer)`), for example `ringtrace tail -f PATH`.

use std::process::Command;
use std::time::{Duration, Instant};

use ringtrace::{Access, MpscRing, Wakeup};

const RECORDS: u32 = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("consumer") => consumer(args.get(2).ok_or("usage: two_processes consumer PATH")?),
        _ => producer(),
    }
}

/// The first process: creates the ring file, starts the consumer process, writes.
fn producer() -> Result<(), Box<dyn std::error::Error>> {
    // A ring file (mode 0600, created exclusively). On tmpfs (/dev/shm) it never
    // touches a disk; any directory works.
    let path = std::env::temp_dir().join(format!("ringtrace-example-{}.ring", std::process::id()));
    let ring = MpscRing::builder(1 << 16).create(&path)?;
    let mut producer = ring.producer()?;
    println!("[producer {}] created {}", std::process::id(), path.display());

    // Start the second process: this program again, as the consumer.
    let mut child = Command::new(std::env::current_exe()?).arg("consumer").arg(&path).spawn()?;

    for i in 0..RECORDS {
        producer.output(format!("record {i}").as_bytes(), Wakeup::Default)?;
    }
    producer.output(b"bye", Wakeup::Force)?; // tells the consumer we are done
    println!("[producer] wrote {RECORDS} records and \"bye\"");

    let status = child.wait()?;
    std::fs::remove_file(&path)?; // processes that still map it keep their mapping
    if !status.success() {
        return Err(format!("consumer process failed: {status}").into());
    }
    Ok(())
}

/// The second process: attaches to the ring file by path and consumes.
fn consumer(path: &str) -> Result<(), Box<dyn std::error::Error>> {
    // `Access::Consumer` maps read-only what a consumer only reads. Attaching checks
    // the file first (it is untrusted input).
    let ring = MpscRing::open_with(path, Access::Consumer)?;
    let mut consumer = ring.consumer()?;
    println!("[consumer {}] attached to {path}", std::process::id());

    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut read, mut done) = (0u32, false);
    while !done {
        if Instant::now() > deadline {
            return Err(format!("timed out after {read} records").into());
        }
        // Sleeps on a futex in the file until the producer process commits.
        consumer.poll(Some(Duration::from_millis(100)), |rec: &[u8]| {
            if rec == b"bye" {
                done = true;
            } else {
                if read % 250 == 0 {
                    println!("[consumer] {}", String::from_utf8_lossy(rec));
                }
                read += 1;
            }
        })?;
    }
    println!("[consumer] read {read} records, then \"bye\"");
    assert_eq!(read, RECORDS);
    Ok(())
}
