//! Byte offset -> 1-based `(line, column)` mapping for error messages.
//!
//! A config with a large `[[route]]` table asks for many positions (every duplicate check
//! remembers where a prefix was first defined), so [`LineIndex`] records where each line
//! starts once and answers each question with a binary search.

/// Where each line of a text starts: built once in one pass over the text.
#[derive(Clone, Debug)]
pub struct LineIndex {
    /// Byte offset of the first byte of each line; `starts[0] == 0`.
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = Vec::with_capacity(text.len() / 32 + 1);
        starts.push(0);
        starts.extend(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    /// The 1-based line of byte `offset` (offsets past the end are on the last line).
    pub fn line(&self, offset: usize) -> usize {
        // The number of line starts at or before `offset`.
        self.starts.partition_point(|&s| s <= offset)
    }

    /// The 1-based `(line, column)` of byte `offset` of `text` (the text the index was built
    /// from). The column counts characters, not bytes, as an editor shows it; an offset
    /// inside a character or past the end clamps back.
    pub fn line_col(&self, text: &str, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line(offset);
        let start = self.starts[line - 1];
        (line, 1 + text[start..offset].chars().count())
    }
}

/// Converts a byte offset into `text` to a 1-based `(line, column)` (one question: no index
/// kept).
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text.as_bytes()[..offset];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let column = 1 + text[line_start..offset].chars().count();
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::{LineIndex, line_col};

    #[test]
    fn maps_offsets() {
        let t = "ab\ncd\n\néx";
        let index = LineIndex::new(t);
        for (offset, want) in [
            (0, (1, 1)),
            (1, (1, 2)),
            (2, (1, 3)),
            (3, (2, 1)),
            (6, (3, 1)),
            (7, (4, 1)),
            (9, (4, 2)),
            (8, (4, 1)),
            (999, (4, 3)),
        ] {
            assert_eq!(line_col(t, offset), want, "offset {offset}");
            assert_eq!(index.line_col(t, offset), want, "offset {offset} (index)");
        }
    }

    #[test]
    fn index_agrees_with_the_plain_scan_everywhere() {
        let t = "\n\na\nbé\n\n[x]\nlast";
        let index = LineIndex::new(t);
        for offset in 0..=t.len() + 2 {
            assert_eq!(index.line_col(t, offset), line_col(t, offset), "offset {offset}");
        }
        assert_eq!(LineIndex::new("").line_col("", 0), (1, 1));
    }
}
