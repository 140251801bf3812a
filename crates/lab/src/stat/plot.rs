//! ministat's ASCII-art plot: one row of symbols per data set (or all on one), the mean as
//! `A`, the median as `M` and one standard deviation either side as `|___|`.

use super::sample::Sample;

/// Plot symbols: index 1..=7 is the data set, bitwise-or'ed where sets overlap.
pub(super) const SYMBOL: [u8; 8] = *b" x+*%#@O";

/// C's `(int)double` as amd64 does it: truncation, and INT_MIN for NaN or out of range.
fn c_int(v: f64) -> i64 {
    if v.is_nan() || v >= 2147483648.0 || v <= -2147483649.0 {
        i32::MIN as i64
    } else {
        v.trunc() as i64
    }
}

/// ministat's ASCII-art plot.
pub(super) struct Plot {
    min: f64,
    max: f64,
    span: f64,
    width: i32,
    x0: f64,
    dx: f64,
    height: usize,
    data: Vec<u8>,
    bars: Vec<Option<Vec<u8>>>,
    separate: bool,
}

impl Plot {
    pub(super) fn new(width: i32, separate: bool, num_sets: usize) -> Plot {
        Plot {
            min: 999e99,
            max: -999e99,
            span: 0.0,
            width,
            x0: 0.0,
            dx: 0.0,
            height: 0,
            data: Vec::new(),
            bars: vec![None; num_sets],
            separate,
        }
    }

    fn w(&self) -> usize {
        self.width.max(0) as usize
    }

    fn adj(&mut self, a: f64) {
        if a < self.min {
            self.min = a;
        }
        if a > self.max {
            self.max = a;
        }
        self.span = self.max - self.min;
        self.dx = self.span / (self.width as f64 - 1.0);
        self.x0 = self.min - 0.5 * self.dx;
    }

    pub(super) fn dim(&mut self, s: &Sample, population: bool) {
        let (a, sd) = (s.mean(), s.stddev(population));
        self.adj(s.min());
        self.adj(s.max());
        self.adj(a - sd);
        self.adj(a + sd);
    }

    fn col(&self, v: f64) -> i64 {
        c_int((v - self.x0) / self.dx)
    }

    pub(super) fn add(&mut self, s: &Sample, val: u8, population: bool) {
        if self.span == 0.0 {
            return;
        }
        let w = self.w();
        let bar = if self.separate { val as usize - 1 } else { 0 };
        if self.bars[bar].is_none() {
            self.bars[bar] = Some(vec![0; w]);
        }
        // Height needed: the longest run of points falling in the same column, plus one.
        let mut m: usize = 1;
        let mut i: i64 = -1;
        let mut j: usize = 0;
        for &p in s.points() {
            let x = self.col(p);
            if x == i {
                j += 1;
                if j > m {
                    m = j;
                }
            } else {
                j = 1;
                i = x;
            }
        }
        m += 1;
        if m > self.height {
            // realloc to m rows; rows from the current height on are cleared.
            self.data.resize(w * m, 0);
            self.data[self.height * w..].fill(0);
        }
        self.height = m;
        i = -1;
        for &p in s.points() {
            let x = self.col(p);
            if x == i {
                j += 1;
            } else {
                j = 1;
                i = x;
            }
            let idx = j as i128 * w as i128 + x as i128;
            if idx >= 0 && (idx as usize) < self.data.len() {
                self.data[idx as usize] |= val;
            }
        }
        let (av, sd) = (s.mean(), s.stddev(population));
        let med = self.col(s.median());
        let avx = self.col(av);
        let (lo, hi) = (self.col(av - sd), self.col(av + sd));
        let b = self.bars[bar].as_mut().expect("allocated above");
        let mut set = |k: i64, c: u8| {
            if k >= 0 && (k as usize) < b.len() {
                b[k as usize] = c;
            }
        };
        if !sd.is_nan() {
            set(hi, b'|');
            set(lo, b'|');
            let start = lo + 1;
            if start >= 0 {
                for z in start..hi.min(w as i64) {
                    if b[z as usize] == 0 {
                        b[z as usize] = b'_';
                    }
                }
            }
        }
        let b = self.bars[bar].as_mut().expect("allocated above");
        for (k, c) in [(med, b'M'), (avx, b'A')] {
            if k >= 0 && (k as usize) < b.len() {
                b[k as usize] = c;
            }
        }
    }

    pub(super) fn dump(&self, out: &mut Vec<u8>) {
        if self.span == 0.0 {
            out.extend_from_slice(b"[no plot, span is zero width]\n");
            return;
        }
        let w = self.w();
        let border = |out: &mut Vec<u8>| {
            out.push(b'+');
            out.extend(std::iter::repeat_n(b'-', w));
            out.extend_from_slice(b"+\n");
        };
        border(out);
        for z in 1..self.height {
            out.push(b'|');
            let row = (self.height - z) * w;
            for &k in &self.data[row..row + w] {
                let k = k as i8;
                if (0..8).contains(&k) {
                    out.push(SYMBOL[k as usize]);
                } else {
                    out.extend_from_slice(format!("[{:02x}]", k as i32 as u32).as_bytes());
                }
            }
            out.extend_from_slice(b"|\n");
        }
        for b in self.bars.iter().flatten() {
            out.push(b'|');
            out.extend(b.iter().map(|&k| if k == 0 { b' ' } else { k }));
            out.extend_from_slice(b"|\n");
        }
        border(out);
    }
}
