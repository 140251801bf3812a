//! systemd's service notification protocol (sd_notify(3)), written by hand: one datagram of
//! `KEY=VALUE` lines to the unix socket named by `NOTIFY_SOCKET`, a path or, with a leading
//! `@`, an abstract name. `run` sends `READY=1` once it forwards, `RELOADING=1` with
//! `MONOTONIC_USEC` (systemd >= 253 wants it to match the reload to its request) and then
//! `READY=1` around a SIGHUP reload, and `STOPPING=1` when it stops (`dist/linerate.service`,
//! `Type=notify`). Without `NOTIFY_SOCKET` every call does nothing.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Where to send notifications, if systemd asked for them.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

/// The socket address `NOTIFY_SOCKET` names.
fn address(value: &str) -> io::Result<SocketAddr> {
    if let Some(name) = value.strip_prefix('@') {
        SocketAddr::from_abstract_name(name.as_bytes())
    } else if value.starts_with('/') {
        SocketAddr::from_pathname(value)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "only unix socket paths and @abstract names are supported by linerate",
        ))
    }
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and opens the sending socket now (before privileges drop).
    pub fn from_env() -> Notifier {
        let Some(value) = std::env::var_os("NOTIFY_SOCKET") else {
            return Notifier { target: None };
        };
        let value = value.to_string_lossy();
        match address(&value).and_then(|a| Ok((UnixDatagram::unbound()?, a))) {
            Ok(target) => Notifier { target: Some(target) },
            Err(e) => {
                crate::log::warn(format_args!(
                    "NOTIFY_SOCKET {value:?}: {e}; systemd will not hear that linerate is ready"
                ));
                Notifier { target: None }
            }
        }
    }

    /// Sends one notification (lines `KEY=VALUE`); an error is logged, not fatal.
    pub fn send(&self, message: &str) {
        let Some((sock, addr)) = &self.target else { return };
        if let Err(e) = sock.send_to_addr(message.as_bytes(), addr) {
            crate::log::warn(format_args!(
                "notifying systemd ({}): {e}",
                message.lines().next().unwrap_or("")
            ));
        }
    }

    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}\n"));
    }

    /// Before a reload: systemd >= 253 matches `MONOTONIC_USEC` against the time it sent
    /// the reload signal.
    pub fn reloading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the rules\n",
            ::io::clock::monotonic_usec()
        ));
    }

    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=stopping\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn receive(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn notifies_a_path_socket() {
        let dir = std::env::temp_dir().join(format!("lr-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        listener.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = Notifier {
            target: Some((
                UnixDatagram::unbound().unwrap(),
                address(path.to_str().unwrap()).unwrap(),
            )),
        };
        n.ready("forwarding");
        assert_eq!(receive(&listener), "READY=1\nSTATUS=forwarding\n");
        let before = ::io::clock::monotonic_usec();
        n.reloading();
        let msg = receive(&listener);
        let usec: u64 =
            msg.lines().find_map(|l| l.strip_prefix("MONOTONIC_USEC=")).unwrap().parse().unwrap();
        assert!(msg.starts_with("RELOADING=1\n"), "{msg}");
        assert!(usec >= before && usec < before + 5_000_000, "{usec} vs {before}");
        n.stopping();
        assert!(receive(&listener).starts_with("STOPPING=1\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn notifies_an_abstract_socket() {
        let name = format!("lr-notify-test-{}", std::process::id());
        let listener =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        listener.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = Notifier {
            target: Some((UnixDatagram::unbound().unwrap(), address(&format!("@{name}")).unwrap())),
        };
        n.ready("up");
        assert_eq!(receive(&listener), "READY=1\nSTATUS=up\n");
    }

    #[test]
    fn other_addresses_are_refused() {
        assert!(address("vsock:2:1234").unwrap_err().to_string().contains("supported by linerate"));
        assert!(Notifier { target: None }.target.is_none());
    }
}
