//! Classic libpcap capture files (the format of `tcpdump -w`): read for Ethernet only; written
//! for Ethernet or any link type ([`PcapWriter::with_link`], e.g. pflog).
//!
//! Format: a 24-byte global header (magic, version 2.4, snaplen, link type) then records of a
//! 16-byte header (seconds, sub-second, captured length, original length) and the bytes.
//! The magic tells byte order and whether the sub-second field is micro- or nanoseconds.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

const MAGIC_USEC: u32 = 0xa1b2_c3d4;
const MAGIC_NSEC: u32 = 0xa1b2_3c4d;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
const SNAPLEN: u32 = 65535;

#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{path}: not a pcap file (magic {magic:#010x}; pcapng is not supported: convert with `editcap -F pcap`)"
    )]
    BadMagic { path: PathBuf, magic: u32 },
    #[error("{path}: link type {linktype} is not Ethernet (1)")]
    NotEthernet { path: PathBuf, linktype: u32 },
    #[error("{path}: record {index} at byte {offset} is truncated")]
    Truncated { path: PathBuf, index: usize, offset: usize },
    #[error("{path}: record {index} claims {len} bytes, more than the snap length")]
    TooLong { path: PathBuf, index: usize, len: u32 },
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub ts_sec: u32,
    pub ts_nsec: u32,
    pub data: Vec<u8>,
}

/// Reads every record of a capture file.
pub fn read_file(path: &Path) -> Result<Vec<Record>, PcapError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| PcapError::Io { path: path.to_owned(), source })?;
    parse(&bytes, path)
}

/// Parses a capture held in memory; `path` is only used in errors.
pub fn parse(bytes: &[u8], path: &Path) -> Result<Vec<Record>, PcapError> {
    let truncated = |index, offset| PcapError::Truncated { path: path.to_owned(), index, offset };
    if bytes.len() < 24 {
        return Err(truncated(0, 0));
    }
    let le = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let be = u32::from_be_bytes(bytes[0..4].try_into().unwrap());
    let (little, nanos) = match (le, be) {
        (MAGIC_USEC, _) => (true, false),
        (MAGIC_NSEC, _) => (true, true),
        (_, MAGIC_USEC) => (false, false),
        (_, MAGIC_NSEC) => (false, true),
        _ => return Err(PcapError::BadMagic { path: path.to_owned(), magic: be }),
    };
    let word = |at: usize| {
        let b: [u8; 4] = bytes[at..at + 4].try_into().unwrap();
        if little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) }
    };
    let linktype = word(20) & 0x0fff_ffff; // upper bits carry FCS-length flags
    if linktype != LINKTYPE_ETHERNET {
        return Err(PcapError::NotEthernet { path: path.to_owned(), linktype });
    }
    let mut records = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let index = records.len();
        if bytes.len() - at < 16 {
            return Err(truncated(index, at));
        }
        let (ts_sec, sub, caplen) = (word(at), word(at + 4), word(at + 8));
        if caplen > 262_144 {
            return Err(PcapError::TooLong { path: path.to_owned(), index, len: caplen });
        }
        let start = at + 16;
        let end = start + caplen as usize;
        if end > bytes.len() {
            return Err(truncated(index, at));
        }
        let ts_nsec = if nanos { sub } else { sub.saturating_mul(1000) };
        records.push(Record { ts_sec, ts_nsec, data: bytes[start..end].to_vec() });
        at = end;
    }
    Ok(records)
}

/// Writes a microsecond-resolution little-endian capture, as tcpdump does on x86.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl PcapWriter<BufWriter<File>> {
    pub fn create(path: &Path) -> io::Result<Self> {
        PcapWriter::new(BufWriter::new(File::create(path)?))
    }
}

/// The 24-byte file header of a capture of `linktype` frames cut to `snaplen` bytes.
pub fn file_header(linktype: u32, snaplen: u32) -> [u8; 24] {
    let mut header = [0u8; 24];
    header[0..4].copy_from_slice(&MAGIC_USEC.to_le_bytes());
    header[4..6].copy_from_slice(&2u16.to_le_bytes());
    header[6..8].copy_from_slice(&4u16.to_le_bytes());
    header[16..20].copy_from_slice(&snaplen.to_le_bytes());
    header[20..24].copy_from_slice(&linktype.to_le_bytes());
    header
}

/// The 16-byte header of a record of `caplen` bytes kept of `orig_len`.
pub fn record_header(ts_sec: u32, ts_usec: u32, caplen: u32, orig_len: u32) -> [u8; 16] {
    let mut header = [0u8; 16];
    header[0..4].copy_from_slice(&ts_sec.to_le_bytes());
    header[4..8].copy_from_slice(&ts_usec.to_le_bytes());
    header[8..12].copy_from_slice(&caplen.to_le_bytes());
    header[12..16].copy_from_slice(&orig_len.to_le_bytes());
    header
}

impl<W: Write> PcapWriter<W> {
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_link(out, LINKTYPE_ETHERNET, SNAPLEN)
    }

    /// A capture of `linktype` frames (e.g. [`crate::pflog::LINKTYPE_PFLOG`]) whose records
    /// hold at most `snaplen` bytes.
    pub fn with_link(mut out: W, linktype: u32, snaplen: u32) -> io::Result<Self> {
        out.write_all(&file_header(linktype, snaplen))?;
        Ok(PcapWriter { out })
    }

    /// Appends a record holding `data`, the first bytes of a frame of `orig_len` bytes.
    pub fn write_cut(
        &mut self,
        ts_sec: u32,
        ts_usec: u32,
        data: &[&[u8]],
        orig_len: u32,
    ) -> io::Result<()> {
        let caplen: usize = data.iter().map(|d| d.len()).sum();
        self.out.write_all(&record_header(
            ts_sec,
            ts_usec,
            caplen as u32,
            orig_len.max(caplen as u32),
        ))?;
        for d in data {
            self.out.write_all(d)?;
        }
        Ok(())
    }

    /// Appends one frame with the given timestamp.
    pub fn write(&mut self, ts_sec: u32, ts_usec: u32, frame: &[u8]) -> io::Result<()> {
        let len = frame.len() as u32;
        self.out.write_all(&record_header(ts_sec, ts_usec, len, len))?;
        self.out.write_all(frame)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// First 40 bytes of a real `tcpdump -w` capture (big-endian writer, 1 ARP frame, 42 bytes).
    const BE_CAPTURE_HEAD: [u8; 24] = [
        0xa1, 0xb2, 0xc3, 0xd4, 0x00, 0x02, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x01,
    ];

    #[test]
    fn write_then_read_roundtrip() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(1, 2, &[0xaa; 60]).unwrap();
        w.write(3, 4, &[0xbb; 61]).unwrap();
        let bytes = w.into_inner();
        let recs = parse(&bytes, Path::new("mem")).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0], Record { ts_sec: 1, ts_nsec: 2000, data: vec![0xaa; 60] });
        assert_eq!(recs[1].data.len(), 61);
    }

    #[test]
    fn cut_records_keep_the_original_length() {
        let mut w = PcapWriter::with_link(Vec::new(), 117, 128).unwrap();
        w.write_cut(7, 8, &[&[1, 2], &[3]], 1500).unwrap();
        let b = w.into_inner();
        assert_eq!(&b[16..24], &[128, 0, 0, 0, 117, 0, 0, 0]);
        assert_eq!(&b[24..40], &[7, 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 0xdc, 5, 0, 0]);
        assert_eq!(&b[40..], &[1, 2, 3]);
    }

    #[test]
    fn reads_big_endian_files() {
        let mut bytes = BE_CAPTURE_HEAD.to_vec();
        bytes.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 2, 0xde, 0xad]);
        let recs = parse(&bytes, Path::new("be")).unwrap();
        assert_eq!(recs, vec![Record { ts_sec: 5, ts_nsec: 6000, data: vec![0xde, 0xad] }]);
    }

    #[test]
    fn rejects_bad_input_with_reasons() {
        let p = Path::new("x.pcap");
        assert!(matches!(parse(&[0; 10], p), Err(PcapError::Truncated { .. })));
        assert!(matches!(parse(&[0; 24], p), Err(PcapError::BadMagic { .. })));
        let mut linux_sll = BE_CAPTURE_HEAD;
        linux_sll[23] = 113;
        assert!(matches!(parse(&linux_sll, p), Err(PcapError::NotEthernet { linktype: 113, .. })));
        let mut short = BE_CAPTURE_HEAD.to_vec();
        short.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 9, 0, 0, 0, 9, 1]);
        let err = parse(&short, p).unwrap_err().to_string();
        assert!(err.contains("record 0") && err.contains("truncated"), "{err}");
    }
}
