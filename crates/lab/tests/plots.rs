//! Every plot the lab writes renders: the SVGs of a lab's bars (ten sets with the default
//! lab's names), its overload sweep and a rules sweep are converted to PNG by librsvg
//! (`rsvg-convert`, Debian's librsvg2-bin) and the PNGs checked (signature, size).
//! `LR_KEEP_PLOTS=1` keeps them (in the system's temporary folder) to look at.

use std::path::Path;
use std::process::Command;

use lab::plot::{Bar, bars, lines};

/// Renders `svg` to PNG in `dir`; returns the PNG's width and height.
fn render(dir: &Path, name: &str, svg: &str) -> (u32, u32) {
    let (src, png) = (dir.join(format!("{name}.svg")), dir.join(format!("{name}.png")));
    std::fs::write(&src, svg).unwrap();
    let out = Command::new("rsvg-convert").arg("-o").arg(&png).arg(&src).output().unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}: not a PNG");
    let be = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn every_plot_renders_to_png() {
    if Command::new("rsvg-convert").arg("--version").output().is_err() {
        return lab::topology::skip_test("needs rsvg-convert (Debian librsvg2-bin)");
    }
    let dir = std::env::temp_dir().join(format!("lr-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let names = [
        "kernel",
        "linerate",
        "linerate-pipeline",
        "kernel-nft-1000",
        "kernel-nft-set-1000",
        "linerate-1000",
        "linerate-1000-pipeline",
        "kernel-nft-masquerade",
        "linerate-nat",
        "linerate-nat-pipeline",
    ];
    let sets: Vec<Bar<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, &label)| {
            let median = 4e5 + 3e5 * i as f64;
            Bar { label, median, min: median * 0.9, max: median * 1.05 }
        })
        .collect();
    let (w, h) = render(&dir, "bars", &bars("forwarding rate at the receiver", &sets));
    assert!(w >= 1000 && h > 300, "ten bars get room: {w}x{h}");
    let sweep = |rate: f64| -> Vec<(f64, f64)> {
        [0.5, 1.0, 2.0, 3.0, 8.0].iter().map(|m| (rate * m, rate * m.min(1.0))).collect()
    };
    let overload = [("kernel", sweep(8e5)), ("linerate", sweep(1.6e6))];
    render(
        &dir,
        "overload",
        &lines("delivered vs offered (overload sweep)", "offered pps", &overload),
    );
    let rules = [
        ("nft", vec![(1.0, 8e5), (100.0, 4e5), (10000.0, 8e3)]),
        ("linerate", vec![(1.0, 1.6e6), (100.0, 1.6e6), (10000.0, 1.5e6)]),
    ];
    render(&dir, "rules", &lines("forwarding rate vs rules", "rules", &rules));
    if std::env::var_os("LR_KEEP_PLOTS").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
