//! One data set's statistics, as ministat computes them.

/// One data set, computed as ministat does: the sum in input order, the points sorted,
/// the variance by a second pass over the sorted points around the mean.
#[derive(Clone, Debug)]
pub struct Sample {
    points: Vec<f64>,
    sum: f64,
    sum_sq_dev: f64,
}

impl Sample {
    pub fn new(mut points: Vec<f64>) -> Sample {
        let sum = points.iter().fold(0.0, |s, &p| s + p);
        points.sort_by(dbl_cmp);
        let mut s = Sample { points, sum, sum_sq_dev: 0.0 };
        let a = s.mean();
        s.sum_sq_dev = s.points.iter().fold(0.0, |acc, &p| acc + (p - a) * (p - a));
        s
    }

    /// The points, sorted.
    pub fn points(&self) -> &[f64] {
        &self.points
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Smallest point (NaN for an empty sample).
    pub fn min(&self) -> f64 {
        self.points.first().copied().unwrap_or(f64::NAN)
    }

    /// Largest point (NaN for an empty sample).
    pub fn max(&self) -> f64 {
        self.points.last().copied().unwrap_or(f64::NAN)
    }

    pub fn mean(&self) -> f64 {
        self.sum / self.len() as f64
    }

    /// The middle point, or the mean of the two middle points for an even count.
    pub fn median(&self) -> f64 {
        let n = self.len();
        if n == 0 {
            return f64::NAN;
        }
        let m = n / 2;
        if n.is_multiple_of(2) {
            (self.points[m] + self.points[m - 1]) / 2.0
        } else {
            self.points[m]
        }
    }

    /// Sample variance (divisor n - 1).
    pub fn variance(&self) -> f64 {
        self.sum_sq_dev / (self.len() as f64 - 1.0)
    }

    /// Sample standard deviation, or with `population` (`-P`) the population one.
    pub fn stddev(&self, population: bool) -> f64 {
        let n = self.len() as f64;
        if population {
            self.variance().sqrt() * ((n - 1.0) / n).sqrt()
        } else {
            self.variance().sqrt()
        }
    }

    pub fn summary(&self, population: bool) -> Summary {
        Summary {
            n: self.len(),
            min: self.min(),
            max: self.max(),
            median: self.median(),
            avg: self.mean(),
            stddev: self.stddev(population),
        }
    }
}

impl From<Vec<f64>> for Sample {
    fn from(points: Vec<f64>) -> Sample {
        Sample::new(points)
    }
}

/// ministat's `dbl_cmp`, made a total order for `sort_by` (NaNs last).
fn dbl_cmp(a: &f64, b: &f64) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_nan(), b.is_nan()) {
        (false, false) => a.partial_cmp(b).unwrap_or(Equal),
        (true, true) => Equal,
        (true, false) => Greater,
        (false, true) => Less,
    }
}

/// The statistics of one line of ministat's table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub avg: f64,
    pub stddev: f64,
}
