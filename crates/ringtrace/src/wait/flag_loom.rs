//! loom model of [`super::WaitFlag`]: two writers, each committing one record into a
//! ring of its own, and a reader that sleeps on the doorbell they share whenever its
//! look finds nothing new, until it has both records. A lost wakeup leaves the reader
//! asleep for good: loom reports the deadlock.

use loom::sync::atomic::{AtomicU32, AtomicU64};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use super::WaitFlag;
use crate::sync::Ordering::{Acquire, Release};

/// A doorbell: a counter the reader reads before it arms, and sleeps on while it
/// still holds that value (a futex's contract, or an eventfd's readability).
#[derive(Default)]
struct Bell {
    rung: Mutex<u64>,
    cv: Condvar,
}

impl Bell {
    fn token(&self) -> u64 {
        *self.rung.lock().unwrap()
    }
    fn ring(&self) {
        *self.rung.lock().unwrap() += 1;
        self.cv.notify_all();
    }
    fn sleep(&self, token: u64) {
        let mut rung = self.rung.lock().unwrap();
        while *rung == token {
            rung = self.cv.wait(rung).unwrap();
        }
    }
}

#[derive(Default)]
struct Channel {
    /// The word [`WaitFlag`] runs over (a private channel's, or a channel file's bell
    /// line: the same code).
    flag: AtomicU32,
    bell: Bell,
    /// Each writer's ring, reduced to its one record's header (0: not committed).
    headers: [AtomicU64; 2],
}

fn write(ch: &Channel, i: usize) {
    // Release: pairs with the reader's Acquire load: the record's bytes come first.
    ch.headers[i].store(1, Release);
    // Under loom the barriers are both `fence(SeqCst)` (see `crate::barrier`).
    if WaitFlag::new(&ch.flag).should_ring(false) {
        ch.bell.ring();
    }
}

#[test]
fn no_lost_wakeup_with_two_writers() {
    loom::model(|| {
        let ch = Arc::new(Channel::default());
        let writers: Vec<_> = (0..2)
            .map(|i| {
                let ch = ch.clone();
                thread::spawn(move || write(&ch, i))
            })
            .collect();
        let mut seen = [false; 2];
        while seen != [true; 2] {
            let token = ch.bell.token();
            // The look reads every ring; anything new means "read, do not sleep".
            let look = |seen: &mut [bool; 2]| {
                let mut new = false;
                for (s, h) in seen.iter_mut().zip(&ch.headers) {
                    if !*s && h.load(Acquire) != 0 {
                        *s = true;
                        new = true;
                    }
                }
                new
            };
            if WaitFlag::new(&ch.flag).armed_look(|| look(&mut seen)).unwrap() {
                ch.bell.sleep(token);
                WaitFlag::new(&ch.flag).disarm();
                look(&mut seen);
            }
        }
        for w in writers {
            w.join().unwrap();
        }
    });
}
