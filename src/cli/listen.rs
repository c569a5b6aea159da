//! Where a served endpoint listens (`--metrics`): ADDR:PORT as a socket
//! address or a name that resolves, or `:PORT` for every IPv4 address as
//! node_exporter's `--web.listen-address` takes it.

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};

pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let hint = "give ADDR:PORT, e.g. 127.0.0.1:9464, [::1]:9464, localhost:9464, or :9464 for every address";
    if let Some(port) = text.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| format!("`{port}` is no port (0 to 65535); {hint}"))?;
        return Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)));
    }
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    if !text.contains(':') {
        return Err(format!("no port in `{text}`; {hint}"));
    }
    let mut found = text.to_socket_addrs().map_err(|e| format!("`{text}`: {e}; {hint}"))?;
    found.next().ok_or_else(|| format!("`{text}` resolves to no address; {hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_a_name_or_a_bare_port_is_where_to_listen() {
        assert_eq!(parse_listen("127.0.0.1:9464"), Ok("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(parse_listen("[::1]:9464"), Ok("[::1]:9464".parse().unwrap()));
        assert_eq!(parse_listen(":9464"), Ok("0.0.0.0:9464".parse().unwrap()));
        assert!(parse_listen("localhost:9464").is_ok_and(|a| a.ip().is_loopback() && a.port() == 9464));
    }

    #[test]
    fn what_is_not_an_address_and_a_port_says_what_would_be() {
        for (bad, says) in [
            ("9464", "no port in `9464`"),
            (":99999", "`99999` is no port"),
            (":", "`` is no port"),
            ("127.0.0.1:99999", "`127.0.0.1:99999`: invalid port value"),
            ("127.0.0.1:", "`127.0.0.1:`: invalid port value"),
        ] {
            let message = parse_listen(bad).unwrap_err();
            assert!(message.starts_with(says), "{bad}: {message}");
            assert!(message.ends_with(":9464 for every address"), "{bad}: {message}");
        }
    }
}
