//! A [`StateRecord`] on the wire (the body of INS and UPD): a fixed part of 144 bytes, then
//! the addresses, 4 or 16 bytes each by family. 152 bytes for an IPv4 state, 176 for IPv6,
//! plus one address when translated.
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 12   | state id: creator u32, counter u64                           |
//! | 12     | 1    | family: 4 or 6                                               |
//! | 13     | 1    | IP protocol                                                  |
//! | 14     | 1    | timeout class (pf's `PFTM_*` order)                          |
//! | 15     | 1    | flags: 0x01 sloppy, 0x02 translated, 0x04 translation is the responder's |
//! | 16     | 8    | rule-set digest                                              |
//! | 24     | 4    | rule index                                                   |
//! | 28     | 4    | expire in (seconds)                                          |
//! | 32     | 2    | initiator's port                                             |
//! | 34     | 2    | responder's port                                             |
//! | 36     | 2    | translated port (0 when not translated)                      |
//! | 38     | 2    | reserved                                                     |
//! | 40     | 16   | initiator's peer (`peer.rs`)                                 |
//! | 56     | 16   | responder's peer                                             |
//! | 72     | 32   | packets from initiator, from responder; bytes likewise (u64) |
//! | 104    | 20   | pf state keyed from the initiator                            |
//! | 124    | 20   | pf state keyed from the responder                            |
//! | 144    | A    | initiator's address (A = 4 or 16)                            |
//! | 144+A  | A    | responder's address                                          |
//! | 144+2A | A    | translated address, when flag 0x02                           |
//!
//! A pf state: flags u8 (0x01 present, 0x02 `allow-opts`), a reserved byte, tag u16, the
//! interface name in 16 bytes padded with NULs (all NUL: floating).
//!
//! Reserved bytes and flags are sent as zero and ignored; bytes after the last field are
//! ignored too, so that a later version can append fields that this one skips.

use crate::record::{IFNAME_MAX, TCP};
use crate::wire::{BodyError, Put, Reader};
use crate::{
    Endpoint, Family, FieldError, Peer, PfState, RuleRef, Side, StateId, StateRecord, TimeoutClass,
    Translation,
};

const SLOPPY: u8 = 0x01;
const TRANSLATED: u8 = 0x02;
const TRANSLATED_RESPONDER: u8 = 0x04;

const PF_STATE_PRESENT: u8 = 0x01;
const PF_STATE_ALLOW_OPTS: u8 = 0x02;
/// Bytes of an interface name on the wire: `IFNAMSIZ`, NUL-padded.
const IFNAME_LEN: usize = IFNAME_MAX + 1;

impl StateRecord {
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        self.id.write(out);
        out.put_u8(self.family.code());
        out.put_u8(self.proto);
        out.put_u8(self.timeout.code());
        out.put_u8(self.flags());
        out.put_u64(self.rule.digest);
        out.put_u32(self.rule.index);
        out.put_u32(self.expire_in);
        out.put_u16(self.initiator.port);
        out.put_u16(self.responder.port);
        out.put_u16(self.translation.map_or(0, |t| t.port));
        out.put_u16(0);
        self.peers.iter().for_each(|p| p.write(out));
        self.packets.iter().chain(&self.bytes).for_each(|&n| out.put_u64(n));
        write_pf_state(self.from_initiator.as_ref(), out);
        write_pf_state(self.from_responder.as_ref(), out);
        out.put_addr(&self.initiator.addr);
        out.put_addr(&self.responder.addr);
        if let Some(t) = &self.translation {
            out.put_addr(&t.addr);
        }
    }

    fn flags(&self) -> u8 {
        let side = match self.translation.map(|t| t.side) {
            None => 0,
            Some(Side::Initiator) => TRANSLATED,
            Some(Side::Responder) => TRANSLATED | TRANSLATED_RESPONDER,
        };
        side | if self.sloppy { SLOPPY } else { 0 }
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<StateRecord, BodyError> {
        let id = StateId::read(r)?;
        let family = Family::from_code(r.u8()?)?;
        let proto = r.u8()?;
        let timeout = TimeoutClass::from_code(r.u8()?)?;
        let flags = r.u8()?;
        let rule = RuleRef { digest: r.u64()?, index: r.u32()? };
        let expire_in = r.u32()?;
        let ports = [r.u16()?, r.u16()?, r.u16()?];
        r.u16()?;
        let tcp = proto == TCP;
        let peers = [Peer::read(r, tcp)?, Peer::read(r, tcp)?];
        let packets = [r.u64()?, r.u64()?];
        let bytes = [r.u64()?, r.u64()?];
        let from_initiator = read_pf_state(r)?;
        let from_responder = read_pf_state(r)?;
        let v6 = family == Family::V6;
        let initiator = Endpoint { addr: r.addr(v6)?, port: ports[0] };
        let responder = Endpoint { addr: r.addr(v6)?, port: ports[1] };
        let translation = read_translation(r, flags, v6, ports[2])?;
        let record = StateRecord {
            id,
            family,
            proto,
            initiator,
            responder,
            translation,
            rule,
            from_initiator,
            from_responder,
            peers,
            expire_in,
            timeout,
            sloppy: flags & SLOPPY != 0,
            packets,
            bytes,
        };
        record.check()?;
        Ok(record)
    }
}

fn read_translation(
    r: &mut Reader<'_>,
    flags: u8,
    v6: bool,
    port: u16,
) -> Result<Option<Translation>, BodyError> {
    if flags & TRANSLATED == 0 {
        return Ok(None);
    }
    let side = if flags & TRANSLATED_RESPONDER != 0 { Side::Responder } else { Side::Initiator };
    Ok(Some(Translation { side, addr: r.addr(v6)?, port }))
}

fn write_pf_state(state: Option<&PfState>, out: &mut Vec<u8>) {
    let Some(s) = state else {
        out.extend_from_slice(&[0; 4 + IFNAME_LEN]);
        return;
    };
    out.put_u8(PF_STATE_PRESENT | if s.allow_opts { PF_STATE_ALLOW_OPTS } else { 0 });
    out.put_u8(0);
    out.put_u16(s.tag);
    let mut name = [0u8; IFNAME_LEN];
    let given = s.interface.as_deref().unwrap_or("").as_bytes();
    // `check` keeps names within 15 bytes; a longer one is cut rather than overrun.
    let n = given.len().min(IFNAME_MAX);
    name[..n].copy_from_slice(&given[..n]);
    out.extend_from_slice(&name);
}

fn read_pf_state(r: &mut Reader<'_>) -> Result<Option<PfState>, BodyError> {
    let (flags, _reserved, tag) = (r.u8()?, r.u8()?, r.u16()?);
    let name: [u8; IFNAME_LEN] = r.array()?;
    if flags & PF_STATE_PRESENT == 0 {
        return Ok(None);
    }
    Ok(Some(PfState {
        interface: interface_name(&name)?,
        allow_opts: flags & PF_STATE_ALLOW_OPTS != 0,
        tag,
    }))
}

/// The name before the first NUL; none when it is empty. The last byte is always a NUL (as
/// in `IFNAMSIZ`); bytes after the first NUL are ignored.
fn interface_name(bytes: &[u8; IFNAME_LEN]) -> Result<Option<String>, FieldError> {
    let len = bytes.iter().position(|&b| b == 0).ok_or(FieldError::InterfaceName)?;
    if len == 0 {
        return Ok(None);
    }
    // `check` then refuses what is not printable ASCII.
    let name = std::str::from_utf8(&bytes[..len]).map_err(|_| FieldError::InterfaceName)?;
    Ok(Some(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_end_at_the_first_nul() {
        let mut b = [0u8; IFNAME_LEN];
        assert_eq!(interface_name(&b), Ok(None));
        b[..4].copy_from_slice(b"wan0");
        b[6] = b'x';
        assert_eq!(interface_name(&b), Ok(Some("wan0".into())));
        let full = [b'a'; IFNAME_LEN];
        assert_eq!(interface_name(&full), Err(FieldError::InterfaceName));
    }

    #[test]
    fn an_absent_pf_state_ignores_its_bytes() {
        let mut b = [0xffu8; 4 + IFNAME_LEN];
        b[0] = 0;
        assert_eq!(read_pf_state(&mut Reader::new(&b)), Ok(None));
    }
}
