#![no_main]
//! The static route file's parser on arbitrary UTF-8: Ok or an error naming the line, never
//! a panic.
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count().max(1);
    if let Ok(routes) = config::routefile::parse(text, Path::new("fuzz.routes")) {
        for r in routes {
            assert!(r.line >= 1 && r.line <= lines, "line {} of {lines}", r.line);
        }
    }
});
