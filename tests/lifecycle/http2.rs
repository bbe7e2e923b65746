//! HTTP/2 connections: keep-alive with pings, flow-control stalls, requests in flight.

use std::time::Duration;

use crate::util::TempDir;

use super::*;

#[test]
fn an_idle_http2_connection_closes_at_keep_alive_though_it_answers_pings() {
    let d = TempDir::new("h2idle");
    let (_s, tls, der) = h2_server(&d, "keep-alive = 2");
    block_on(async {
        let (mut client, conn) = h2_connect(tls, &der, 65_535).await;
        let conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/ten.txt"), true).unwrap();
        let mut body = resp.await.unwrap().into_body();
        let mut got = Vec::new();
        while let Some(chunk) = body.data().await {
            got.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(got, b"0123456789");
        // The client stays and answers the server's PINGs (the h2 crate does
        // so while the connection is polled); the server must still close.
        let started = std::time::Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(20), conn).await;
        let idle = started.elapsed();
        assert!(
            ended.is_ok(),
            "an idle HTTP/2 connection was open after 20 s"
        );
        assert!(idle < Duration::from_secs(8), "closed after {idle:?}");
        drop(client);
    });
}

#[test]
fn an_http2_stream_stalled_by_flow_control_is_cut_off_at_send_timeout() {
    let d = TempDir::new("h2stall");
    let (_s, tls, der) = h2_server(&d, "send-timeout = 2");
    block_on(async {
        // A stream window of 0: the response headers come, no data ever can.
        let (mut client, conn) = h2_connect(tls, &der, 0).await;
        let conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        assert_eq!(resp.await.unwrap().status(), 200);
        let ended = tokio::time::timeout(Duration::from_secs(20), conn).await;
        assert!(
            ended.is_ok(),
            "a stalled HTTP/2 stream held its connection for 20 s"
        );
        drop(client);
    });
}

#[test]
fn an_http2_connection_gets_at_most_128_requests_in_flight() {
    let d = TempDir::new("h2many");
    let (_s, tls, der) = h2_server(&d, "");
    block_on(async {
        let (mut client, conn) = h2_connect(tls, &der, 0).await;
        let _conn = tokio::spawn(conn);
        // 128 stalled downloads, each holding a file open on the server.
        let mut held = Vec::new();
        for _ in 0..128 {
            client = client.ready().await.unwrap();
            let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
            held.push(resp);
        }
        // Keep every response (dropping one resets its stream).
        let mut open = Vec::new();
        for resp in held {
            let r = resp.await.unwrap();
            assert_eq!(r.status(), 200);
            open.push(r);
        }
        client = client.ready().await.unwrap();
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers().get("retry-after").unwrap(), "1");
    });
}

#[test]
fn a_stalled_http2_stream_is_cut_off_though_other_requests_come_and_go() {
    let d = TempDir::new("h2mixed");
    let (_s, tls, der) = h2_server(&d, "send-timeout = 2");
    block_on(async {
        // A zero window stalls the download; HEAD answers need no window.
        let (mut client, conn) = h2_connect(tls, &der, 0).await;
        let mut conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        let _stalled = resp.await.unwrap();
        let started = std::time::Instant::now();
        let mut answered = 0;
        while started.elapsed() < Duration::from_secs(15) {
            let head = http::Request::head("https://h2.test/ten.txt")
                .body(())
                .unwrap();
            let Ok(c) = client.clone().ready().await else {
                break;
            };
            client = c;
            let Ok((resp, _)) = client.send_request(head, true) else {
                break;
            };
            match resp.await {
                Ok(r) if r.status() == 200 => answered += 1,
                _ => break,
            }
            // A request every half second keeps the connection busy.
            if tokio::time::timeout(Duration::from_millis(500), &mut conn)
                .await
                .is_ok()
            {
                break;
            }
        }
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(8),
            "a stalled stream survived {took:?} of other requests ({answered} answered)"
        );
        assert!(answered > 0);
    });
}

#[test]
fn a_slow_but_steady_http2_download_is_not_cut_off() {
    let d = TempDir::new("h2slow");
    let (_s, tls, der) = h2_server(&d, "send-timeout = 2");
    block_on(async {
        // 16 KiB of window a second: a slow reader, but a steady one.
        let (mut client, conn) = h2_connect(tls, &der, 16 * 1024).await;
        let conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        let mut body = resp.await.unwrap().into_body();
        let started = std::time::Instant::now();
        let mut got = 0usize;
        let mut since_pause = 0usize;
        while started.elapsed() < Duration::from_secs(6) {
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.data())
                .await
                .expect("the download stopped")
                .expect("the stream ended early")
                .expect("the stream was reset");
            got += chunk.len();
            since_pause += chunk.len();
            body.flow_control().release_capacity(chunk.len()).unwrap();
            if since_pause >= 16 * 1024 {
                since_pause = 0;
                // The reader's pace is the behaviour under test.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        assert!(got >= 4 * 16 * 1024, "only {got} bytes in 6 s");
        assert!(!conn.is_finished(), "the connection was closed");
    });
}
