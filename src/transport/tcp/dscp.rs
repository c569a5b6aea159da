//! Marking a TCP socket's packets with a DSCP (a group's `dscp`): IP_TOS on
//! IPv4, IPV6_TCLASS on IPv6, the DSCP in the upper six bits and the ECN
//! bits left to the kernel.

use std::io;

use socket2::SockRef;

use crate::plan::MAX_DSCP;

/// The TOS / traffic-class byte that carries `dscp` (ECN bits zero).
pub fn tos_byte(dscp: u8) -> u32 {
    u32::from(dscp & MAX_DSCP) << 2
}

/// Sets the DSCP of everything `sock` sends from now on; on a listener, of
/// its SYN-ACKs and of the connections it accepts (they inherit it).
pub fn mark<'s>(sock: impl Into<SockRef<'s>>, ipv6: bool, dscp: u8) -> io::Result<()> {
    let sock = sock.into();
    if ipv6 {
        sock.set_tclass_v6(tos_byte(dscp))
    } else {
        sock.set_tos(tos_byte(dscp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dscp_is_the_upper_six_bits() {
        assert_eq!(tos_byte(0), 0);
        assert_eq!(tos_byte(46), 0xb8, "EF");
        assert_eq!(tos_byte(63), 0xfc);
    }

    #[test]
    fn a_marked_socket_reports_its_tos() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        mark(&l, false, 26).unwrap();
        assert_eq!(SockRef::from(&l).tos().unwrap(), 104);
        let Ok(l6) = std::net::TcpListener::bind("[::1]:0") else { return }; // no IPv6 loopback here
        mark(&l6, true, 10).unwrap();
        assert_eq!(SockRef::from(&l6).tclass_v6().unwrap(), 40);
    }
}
