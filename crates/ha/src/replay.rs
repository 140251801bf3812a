//! Anti-replay as IPsec's (RFC 4303 3.4.3): the highest sequence number accepted and a
//! 64-bit bitmap of the 64 numbers up to it. A datagram is accepted once; one older than the
//! window is refused, since the window can no longer tell whether it was seen. Without it, a
//! recorded DEL or CLR could be sent again by anyone on the link, authenticated or not.
//!
//! Keep one window per peer (by its creator id), and update it only after the datagram
//! decoded with a valid tag ([`decode`](crate::decode) checks the tag first), so that
//! forgeries cannot move the window.

/// Why a sequence number was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Replayed {
    #[error("sequence number seen already")]
    Duplicate,
    #[error("sequence number older than the replay window")]
    TooOld,
}

/// How many numbers below the highest the window remembers.
pub const REPLAY_WINDOW: u64 = 64;

/// One peer's replay window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayWindow {
    /// The highest number accepted, once any was.
    highest: Option<u64>,
    /// Bit `i`: `highest - i` was accepted.
    seen: u64,
}

impl ReplayWindow {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `seq` would be accepted, without recording it.
    pub fn check(&self, seq: u64) -> Result<(), Replayed> {
        let Some(highest) = self.highest else { return Ok(()) };
        if seq > highest {
            return Ok(());
        }
        let age = highest - seq;
        if age >= REPLAY_WINDOW {
            Err(Replayed::TooOld)
        } else if self.seen & (1 << age) != 0 {
            Err(Replayed::Duplicate)
        } else {
            Ok(())
        }
    }

    /// Accepts `seq` if it is new and within the window, and records it.
    pub fn accept(&mut self, seq: u64) -> Result<(), Replayed> {
        self.check(seq)?;
        match self.highest {
            Some(highest) if seq <= highest => self.seen |= 1 << (highest - seq),
            Some(highest) => {
                let shift = seq - highest;
                self.seen = if shift >= REPLAY_WINDOW { 0 } else { self.seen << shift };
                self.seen |= 1;
                self.highest = Some(seq);
            }
            None => {
                self.seen = 1;
                self.highest = Some(seq);
            }
        }
        Ok(())
    }

    /// The highest number accepted so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_number_once_and_none_older_than_the_window() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(1000), Ok(()));
        assert_eq!(w.accept(1000), Err(Replayed::Duplicate));
        // Reordered but within the window: accepted once.
        assert_eq!(w.accept(990), Ok(()));
        assert_eq!(w.accept(990), Err(Replayed::Duplicate));
        assert_eq!(w.accept(1000 - 63), Ok(()));
        assert_eq!(w.accept(1000 - 64), Err(Replayed::TooOld));
        // A jump forward slides the window: 990 is still remembered, 937 falls out.
        assert_eq!(w.accept(1010), Ok(()));
        assert_eq!(w.accept(990), Err(Replayed::Duplicate));
        assert_eq!(w.accept(1000), Err(Replayed::Duplicate));
        assert_eq!(w.check(1009), Ok(()));
        assert_eq!(w.accept(946), Err(Replayed::TooOld));
        assert_eq!(w.accept(947), Ok(()));
        // A jump past the whole window forgets everything below it.
        assert_eq!(w.accept(5000), Ok(()));
        assert_eq!(w.accept(4937), Ok(()));
        assert_eq!(w.accept(4936), Err(Replayed::TooOld));
        assert_eq!(w.highest(), Some(5000));
    }

    #[test]
    fn the_first_number_may_be_anything_including_zero_and_max() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.accept(0), Ok(()));
        assert_eq!(w.accept(0), Err(Replayed::Duplicate));
        assert_eq!(w.accept(u64::MAX), Ok(()));
        assert_eq!(w.accept(u64::MAX - 1), Ok(()));
        assert_eq!(w.accept(0), Err(Replayed::TooOld));
    }

    #[test]
    fn check_does_not_record() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.check(5), Ok(()));
        assert_eq!(w.accept(5), Ok(()));
        assert_eq!(w.check(5), Err(Replayed::Duplicate));
        assert_eq!(w.check(6), Ok(()));
        assert_eq!(w.accept(6), Ok(()));
    }
}
