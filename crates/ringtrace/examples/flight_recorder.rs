//! A flight recorder: producers write without ever waiting for a reader, the ring
//! keeps the newest records that fit, and a snapshot copies them out when something
//! happens (here: at the end), newest first, and saves them to a file, which it leaves
//! for the `ringtrace` command to read.
//!
//!     cargo run --release -p ringtrace --example flight_recorder
//!     ringtrace snapshot /tmp/ringtrace-example/flight.rtsnap --reverse
//!
//! (`$TMPDIR` in place of `/tmp` where it is set.)

use ringtrace::{FlightRecorder, Snapshot, Wakeup};

const THREADS: u64 = 2;
const EVENTS_PER_THREAD: u64 = 100_000;

// `pub`: crates/ringtrace-cli/tests/examples.rs runs it, then the commands above.
pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Overwrite mode: a full ring gives up its oldest records to make room.
    let ring = FlightRecorder::new(1 << 16)?; // the newest ~64 KiB of records
    std::thread::scope(|s| -> Result<(), ringtrace::Error> {
        for t in 0..THREADS {
            let mut producer = ring.producer()?;
            s.spawn(move || {
                for i in 0..EVENTS_PER_THREAD {
                    // An event: which thread, and its sequence number.
                    let mut event = [0u8; 16];
                    event[..8].copy_from_slice(&t.to_le_bytes());
                    event[8..].copy_from_slice(&i.to_le_bytes());
                    // Never waits; a refusal (rare, see README "Limits") is counted in
                    // `stats().lost`.
                    let _ = producer.output(&event, Wakeup::Default);
                }
            });
        }
        Ok(())
    })?;

    // The trigger: copy what the ring holds. Producers could keep writing meanwhile.
    let snap = ring.snapshot()?;
    println!(
        "{} events written, {} held, {} overwritten before the snapshot",
        ring.stats().committed,
        snap.len(),
        snap.overwritten_before()
    );
    println!("newest first:");
    for rec in snap.iter().rev().take(5) {
        let thread = u64::from_le_bytes(rec[..8].try_into()?);
        let seq = u64::from_le_bytes(rec[8..].try_into()?);
        println!("  thread {thread} event {seq}");
    }

    // Save it (CRC32C-checked file format), and read it back as a tool would. Written
    // under a name of this process's, then renamed into place: two runs at once each
    // leave a whole file.
    let dir = std::env::temp_dir().join("ringtrace-example");
    std::fs::create_dir_all(&dir)?;
    let (path, part) = (dir.join("flight.rtsnap"), dir.join(format!("flight.rtsnap.{}", std::process::id())));
    let bytes = snap.write_to(std::fs::File::create(&part)?)?;
    let again = Snapshot::read_from(std::io::BufReader::new(std::fs::File::open(&part)?))?;
    assert!(again.iter().eq(snap.iter()));
    std::fs::rename(&part, &path)?;
    println!("wrote {} ({bytes} bytes), read back {} records", path.display(), again.len());
    println!("read it: ringtrace snapshot {} --reverse", path.display());
    Ok(())
}
