//! The error type shared by every parser and builder.

use core::fmt;

/// Why a buffer was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the fixed header, or shorter than a length
    /// field in the packet says it is.
    Truncated,
    /// A field has a value this crate does not accept (e.g. an ARP packet that
    /// is not Ethernet/IPv4, too many IPv6 extension headers, a bad MAC string).
    Malformed,
    /// The IP version field is wrong for the view.
    BadVersion,
    /// A length field is internally inconsistent (e.g. IPv4 IHL < 5, total
    /// length smaller than the header, UDP length < 8, TCP data offset < 5).
    BadLength,
    /// A builder was given an output buffer too small for the frame.
    BufferTooSmall,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "packet truncated",
            Error::Malformed => "malformed packet",
            Error::BadVersion => "bad IP version",
            Error::BadLength => "inconsistent length field",
            Error::BufferTooSmall => "output buffer too small",
        })
    }
}

impl std::error::Error for Error {}
