//! The `--metrics ADDR:PORT` endpoint: `GET /metrics` answers with the run
//! in the OpenMetrics text format, anything else with 404 or 405. Read-only
//! and on its own thread, so a slow scraper never holds the run up; it
//! stops when dropped.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tiny_http::{Header, Method, Request, Response, Server};

use crate::report::openmetrics::{Live, CONTENT_TYPE};

#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error(
        "--metrics {addr}: cannot listen there: {cause} (give a free ADDR:PORT of this host, e.g. 127.0.0.1:9464)"
    )]
    Bind { addr: SocketAddr, cause: std::io::Error },
    #[error("--metrics {addr}: cannot serve HTTP there: {reason}")]
    Serve { addr: SocketAddr, reason: String },
}

pub struct Endpoint {
    server: Arc<Server>,
    addr: SocketAddr,
    closing: Arc<AtomicBool>,
}

impl Endpoint {
    /// Listens on `addr` (port 0: any free one) and serves `live` from now on.
    pub fn serve(addr: SocketAddr, live: Arc<Live>) -> Result<Endpoint, ScrapeError> {
        let listener = TcpListener::bind(addr).map_err(|cause| ScrapeError::Bind { addr, cause })?;
        let bound = listener.local_addr().map_err(|cause| ScrapeError::Bind { addr, cause })?;
        let server =
            Server::from_listener(listener, None).map_err(|e| ScrapeError::Serve { addr, reason: e.to_string() })?;
        let server = Arc::new(server);
        let closing = Arc::new(AtomicBool::new(false));
        {
            let (server, closing) = (server.clone(), closing.clone());
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || answer_until_closed(&server, &closing, &live))
                .map_err(|e| ScrapeError::Serve { addr, reason: e.to_string() })?;
        }
        Ok(Endpoint { server, addr: bound, closing })
    }

    /// Where it listens (the port chosen, where 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    /// Not joined: a scraper that stopped reading holds its answer's write,
    /// and the run must end regardless. An idle thread leaves at once.
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        self.server.unblock();
    }
}

fn answer_until_closed(server: &Server, closing: &AtomicBool, live: &Live) {
    while !closing.load(Ordering::SeqCst) {
        match server.recv() {
            Ok(request) => answer(request, live),
            // An accept that failed (the listener goes on), or the unblock.
            Err(e) => tracing::debug!("metrics endpoint: {e}"),
        }
    }
}

fn answer(request: Request, live: &Live) {
    let path = request.url().split('?').next().unwrap_or_default();
    let response = match (request.method(), path) {
        (Method::Get, "/metrics") => {
            Response::from_string(live.encode()).with_header(header("Content-Type", CONTENT_TYPE))
        }
        (_, "/metrics") => {
            Response::from_string("only GET is served here\n").with_status_code(405).with_header(header("Allow", "GET"))
        }
        _ => Response::from_string("not found: fabricbench serves /metrics only\n").with_status_code(404),
    };
    if let Err(e) = request.respond(response) {
        tracing::debug!("metrics endpoint: the scraper left before its answer: {e}");
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("ASCII header")
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::*;

    /// One HTTP/1.0 request to `addr`, the whole answer back.
    fn ask(addr: SocketAddr, request_line: &str) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(stream, "{request_line} HTTP/1.0\r\nHost: test\r\n\r\n").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    fn serving() -> Endpoint {
        let any_port: SocketAddr = "127.0.0.1:0".parse().unwrap();
        Endpoint::serve(any_port, Arc::new(Live::new("soak", "s.toml"))).unwrap()
    }

    #[test]
    fn metrics_are_served_as_openmetrics_and_nothing_else_is_served() {
        let endpoint = serving();
        let metrics = ask(endpoint.addr(), "GET /metrics?x=1");
        assert!(metrics.starts_with("HTTP/1.0 200 OK"), "{metrics}");
        assert!(metrics.contains(&format!("Content-Type: {CONTENT_TYPE}")), "{metrics}");
        assert!(metrics.contains("fabricbench_run_info{name=\"soak\",scenario=\"s.toml\"} 1"), "{metrics}");
        assert!(metrics.ends_with("# EOF\n"), "{metrics}");
        let elsewhere = ask(endpoint.addr(), "GET /");
        assert!(elsewhere.starts_with("HTTP/1.0 404") && elsewhere.contains("serves /metrics only"), "{elsewhere}");
        let posted = ask(endpoint.addr(), "POST /metrics");
        assert!(posted.starts_with("HTTP/1.0 405") && posted.contains("Allow: GET"), "{posted}");
    }

    #[test]
    fn a_taken_address_is_refused_by_name_and_a_dropped_endpoint_stops_listening() {
        let endpoint = serving();
        let taken = endpoint.addr();
        let refused = Endpoint::serve(taken, Arc::new(Live::new("soak", "s.toml"))).err().expect("the port is taken");
        let message = refused.to_string();
        assert!(message.starts_with(&format!("--metrics {taken}: cannot listen there: ")), "{message}");
        assert!(message.contains("give a free ADDR:PORT"), "{message}");
        drop(endpoint);
        // The listener closes on tiny_http's accept thread, just after.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while TcpStream::connect(taken).is_ok() {
            assert!(std::time::Instant::now() < deadline, "{taken} still listens");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
