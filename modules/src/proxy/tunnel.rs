//! `Upgrade` requests (WebSocket) through the proxy: the request head goes to
//! the server over a connection of its own; a 101 answer hands the client
//! connection over, and bytes are copied both ways until either side closes
//! or neither sends for `read-timeout` (lighttpd `proxy.header` `upgrade`,
//! nginx `proxy_set_header Upgrade $http_upgrade`).

use std::time::Duration;

use bytes::{Buf, BytesMut};
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::upgrade::{Tunnel, Upgrade};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest response head read from the server, bytes.
const MAX_HEAD: usize = 64 * 1024;

/// A connection of its own to a server, TCP or Unix, leased from the
/// server's pool (closed, never given back, when the tunnel or the body
/// ends).
pub(super) type Stream = tessera_core::upstream::pool::Lease;

/// Sends the upgrade request and reads the answer head. A 101 becomes a
/// response carrying the [`Upgrade`] that runs the tunnel; another status
/// (the server declined the upgrade, RFC 9110 §7.8: an error page, a
/// redirect, or the resource itself) is passed on as an ordinary answer,
/// its body streamed as its framing says (`head_only`: the request was
/// HEAD), and the connection closed after it.
pub(super) async fn upgrade(
    mut up: Stream,
    head: Vec<u8>,
    idle: Duration,
    head_only: bool,
) -> std::io::Result<HttpResponse> {
    up.write_all(&head).await?;
    let mut buf = BytesMut::with_capacity(4096);
    // what is buffered is parsed before more is read: an interim answer
    // and the final one may come in one read
    let mut read = true;
    let (status, headers, len) = loop {
        if read {
            let n = up.read_buf(&mut buf).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        read = true;
        let mut slots = [httparse::EMPTY_HEADER; 64];
        let mut res = httparse::Response::new(&mut slots);
        match res.parse(&buf) {
            Ok(httparse::Status::Complete(len))
                if res
                    .code
                    .is_some_and(|c| (100..200).contains(&c) && c != 101) =>
            {
                // an interim answer (100, 103): the final one follows
                buf.advance(len);
                read = buf.is_empty();
                continue;
            }
            Ok(httparse::Status::Complete(len)) => {
                if !res.code.is_some_and(|c| (100..=599).contains(&c)) {
                    return Err(std::io::ErrorKind::InvalidData.into());
                }
                let mut h = HeaderMap::new();
                for f in res.headers.iter() {
                    if let (Ok(k), Ok(v)) = (
                        HeaderName::from_bytes(f.name.as_bytes()),
                        HeaderValue::from_bytes(f.value),
                    ) {
                        h.append(k, v);
                    }
                }
                break (res.code.unwrap_or(502), h, len);
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            _ => return Err(std::io::ErrorKind::InvalidData.into()),
        }
    };
    buf.advance(len);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    if status != StatusCode::SWITCHING_PROTOCOLS {
        let (body, length) =
            super::client::Body::unpooled(up, buf, idle, (status, head_only), &headers)
                .map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidData, why))?;
        let mut r = HttpResponse::new(status);
        super::forward::response_headers(headers, r.headers_mut());
        return Ok(super::respond(super::client::Response {
            status,
            head: r,
            length,
            lines: None,
            body,
        }));
    }
    let mut r = HttpResponse::build(status).finish();
    // a 101 must name the protocol it switches to (RFC 9110 §15.2.2)
    let upgrade = headers.get(header::UPGRADE).cloned();
    super::forward::response_headers(headers, r.headers_mut());
    let Some(v) = upgrade else {
        return Err(std::io::ErrorKind::InvalidData.into());
    };
    r.headers_mut().insert(header::UPGRADE, v);
    let early = buf;
    r.extensions_mut()
        .insert(Upgrade::new(move |client: Tunnel| async move {
            let Tunnel { io, read } = client;
            let _ = pump(io, read, up, early, idle).await;
        }));
    Ok(r)
}

/// Copies both ways until a side closes or both are idle for `idle`.
async fn pump<U: AsyncRead + AsyncWrite + Unpin>(
    mut client: actix_rt::net::TcpStream,
    from_client: BytesMut,
    mut server: U,
    from_server: BytesMut,
    idle: Duration,
) -> std::io::Result<()> {
    server.write_all(&from_client).await?;
    client.write_all(&from_server).await?;
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = tokio::io::split(server);
    let mut a = vec![0u8; 16 * 1024];
    let mut b = vec![0u8; 16 * 1024];
    loop {
        let deadline = tokio::time::sleep(idle);
        tokio::select! {
            n = cr.read(&mut a) => {
                let n = n?;
                if n == 0 {
                    let _ = sw.shutdown().await;
                    return Ok(());
                }
                // a side that does not read for `idle` ends the tunnel too
                tokio::time::timeout(idle, sw.write_all(&a[..n])).await??;
            }
            n = sr.read(&mut b) => {
                let n = n?;
                if n == 0 {
                    let _ = cw.shutdown().await;
                    return Ok(());
                }
                tokio::time::timeout(idle, cw.write_all(&b[..n])).await??;
            }
            () = deadline => return Ok(()),
        }
    }
}
