//! Zero-loss throughput search, RFC 2544 section 26.1: the highest offered rate at which the
//! DUT forwards every frame, found by binary search: a trial at rate r passes if no frame is
//! lost; the next rate is halfway between the highest passing and the lowest failing rate
//! (the step halves each time), until the two are within the tolerance or the trials run out.

/// What one trial at a given rate gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    pub rate_pps: f64,
    pub sent: u64,
    pub received: u64,
}

impl Trial {
    /// Frames lost, as a fraction of frames sent.
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            1.0
        } else {
            self.sent.saturating_sub(self.received) as f64 / self.sent as f64
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchParams {
    /// Highest rate to try (the first trial).
    pub max_pps: f64,
    /// Stop when the passing and failing rates are this close (pps).
    pub tolerance_pps: f64,
    /// Stop after this many trials.
    pub max_trials: usize,
    /// Loss fraction still counted as "no loss" (RFC 2544: 0).
    pub acceptable_loss: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    /// Highest passing rate (0 if none passed).
    pub rate_pps: f64,
    pub trials: Vec<(Trial, bool)>,
}

/// Runs the search; `trial(rate)` offers `rate` pps for one trial and reports what arrived.
pub fn search<E>(
    p: &SearchParams,
    mut trial: impl FnMut(f64) -> Result<Trial, E>,
) -> Result<SearchResult, E> {
    let (mut pass, mut fail) = (0.0f64, p.max_pps);
    let mut rate = p.max_pps;
    let mut trials = Vec::new();
    while trials.len() < p.max_trials.max(1) {
        let t = trial(rate)?;
        let ok = t.loss() <= p.acceptable_loss;
        trials.push((t, ok));
        if ok {
            pass = rate;
            if rate >= p.max_pps {
                break; // the DUT keeps up with the highest rate asked for
            }
        } else {
            fail = rate;
        }
        if fail - pass <= p.tolerance_pps {
            break;
        }
        rate = (pass + fail) / 2.0;
    }
    Ok(SearchResult { rate_pps: pass, trials })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dut(capacity: f64) -> impl FnMut(f64) -> Result<Trial, ()> {
        move |rate| {
            let sent = rate as u64;
            Ok(Trial { rate_pps: rate, sent, received: sent.min(capacity as u64) })
        }
    }

    #[test]
    fn converges_to_capacity_within_tolerance() {
        let p = SearchParams {
            max_pps: 1_000_000.0,
            tolerance_pps: 1000.0,
            max_trials: 50,
            acceptable_loss: 0.0,
        };
        let r = search(&p, dut(637_000.0)).unwrap();
        assert!(r.rate_pps <= 637_000.0 && r.rate_pps > 636_000.0 - 1000.0, "{}", r.rate_pps);
        assert!(r.trials.len() <= 12);
        // Each step halves: the first trial is the maximum, the second half of it.
        assert_eq!(r.trials[1].0.rate_pps, 500_000.0);
    }

    #[test]
    fn stops_at_max_when_the_dut_keeps_up_and_at_zero_when_it_never_does() {
        let p = SearchParams {
            max_pps: 1000.0,
            tolerance_pps: 1.0,
            max_trials: 30,
            acceptable_loss: 0.0,
        };
        let r = search(&p, dut(5000.0)).unwrap();
        assert_eq!((r.rate_pps, r.trials.len()), (1000.0, 1));
        let r = search(&p, dut(0.0)).unwrap();
        assert_eq!(r.rate_pps, 0.0);
        let p = SearchParams { max_trials: 3, ..p };
        assert_eq!(search(&p, dut(0.0)).unwrap().trials.len(), 3);
    }

    #[test]
    fn errors_propagate() {
        let p = SearchParams {
            max_pps: 1000.0,
            tolerance_pps: 1.0,
            max_trials: 30,
            acceptable_loss: 0.0,
        };
        assert_eq!(search(&p, |_| Err::<Trial, _>("boom")), Err("boom"));
    }
}
