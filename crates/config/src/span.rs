//! Byte offset -> 1-based `(line, column)` mapping for error messages.

/// Converts a byte offset into `text` to a 1-based `(line, column)`.
///
/// The column counts characters (not bytes) from the start of the line, so
/// it matches what an editor shows. Offsets past the end clamp to the end.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text.as_bytes()[..offset];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = 1 + text[line_start..offset].chars().count();
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn maps_offsets() {
        let t = "ab\ncd\n\néx";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 1), (1, 2));
        assert_eq!(line_col(t, 2), (1, 3)); // the '\n' itself
        assert_eq!(line_col(t, 3), (2, 1));
        assert_eq!(line_col(t, 6), (3, 1));
        assert_eq!(line_col(t, 7), (4, 1));
        assert_eq!(line_col(t, 9), (4, 2)); // after 2-byte 'é'
        assert_eq!(line_col(t, 8), (4, 1)); // inside 'é': clamps back
        assert_eq!(line_col(t, 999), (4, 3));
    }
}
