use super::*;

fn upstream(balance: Balance, n: usize) -> Upstreams {
    Upstreams::build(vec![UpstreamConfig {
        name: "u".into(),
        servers: (0..n).map(|i| format!("127.0.0.1:{}", 9000 + i)).collect(),
        balance,
        max_fails: 1,
        fail_timeout: 10,
        connect_timeout: 5,
        read_timeout: 60,
        send_timeout: 60,
        keepalive_timeout: 60,
        keepalive: 32,
        max_connections: 100,
        health_check: None,
        health_interval: 5,
        spawn: None,
    }])
    .unwrap()
}

#[test]
fn round_robin_takes_turns_and_skips_a_down_server() {
    let ups = upstream(Balance::RoundRobin, 3);
    let u = ups.get("u").unwrap();
    let seq: Vec<usize> = (0..3).map(|_| u.pick(None, &[]).unwrap().index).collect();
    assert_eq!(seq, [0, 1, 2]);
    u.pick(None, &[1]).unwrap(); // turn moves on
    let p = u.pick(None, &[]).unwrap();
    let i = p.index;
    p.failed();
    for _ in 0..6 {
        assert_ne!(u.pick(None, &[]).unwrap().index, i);
    }
}

#[test]
fn first_fails_over_in_order_and_retries_skip_tried_servers() {
    let ups = upstream(Balance::First, 3);
    let u = ups.get("u").unwrap();
    assert_eq!(u.pick(None, &[]).unwrap().index, 0);
    assert_eq!(u.pick(None, &[0]).unwrap().index, 1);
    u.pick(None, &[]).unwrap().failed();
    assert_eq!(u.pick(None, &[]).unwrap().index, 1);
    assert!(u.pick(None, &[0, 1, 2]).is_none());
}

#[test]
fn all_down_is_no_server_but_a_single_server_is_always_tried() {
    let ups = upstream(Balance::First, 2);
    let u = ups.get("u").unwrap();
    u.pick(None, &[]).unwrap().failed();
    u.pick(None, &[]).unwrap().failed();
    assert!(u.pick(None, &[]).is_none(), "nginx: no live upstreams");
    let ups = upstream(Balance::First, 1);
    let u = ups.get("u").unwrap();
    u.pick(None, &[]).unwrap().failed();
    assert!(!u.servers[0].is_up());
    assert_eq!(u.pick(None, &[]).unwrap().index, 0);
    assert!(u.pick(None, &[0]).is_none());
}

#[test]
fn ip_hash_is_stable_per_client() {
    let ups = upstream(Balance::IpHash, 4);
    let u = ups.get("u").unwrap();
    for last in 0..50u8 {
        let ip: IpAddr = format!("10.0.0.{last}").parse().unwrap();
        let a = u.pick(Some(ip), &[]).unwrap().index;
        let b = u.pick(Some(ip), &[]).unwrap().index;
        assert_eq!(a, b);
    }
}

#[test]
fn least_conn_prefers_the_idle_server() {
    let ups = upstream(Balance::LeastConn, 2);
    let u = ups.get("u").unwrap();
    let busy = u.pick(None, &[]).unwrap();
    let other = u.pick(None, &[]).unwrap();
    assert_ne!(busy.index, other.index);
    let keep = busy.index;
    drop(other);
    for _ in 0..4 {
        assert_ne!(u.pick(None, &[]).unwrap().index, keep);
    }
}

#[test]
fn bad_declarations_are_refused() {
    let mut c = upstream(Balance::First, 1).all()[0].config.clone();
    c.servers = vec!["http://x:80/".into()];
    assert!(Upstreams::build(vec![c.clone()]).is_err());
    c.servers = vec!["unix:relative.sock".into()];
    assert!(Upstreams::build(vec![c.clone()]).is_err());
    c.servers = vec![];
    assert!(Upstreams::build(vec![c.clone()]).is_err());
    c.servers = vec!["a:1".into()];
    assert!(Upstreams::build(vec![c.clone(), c]).is_err());
}
