//! `linerate gen` and `linerate rcv`: the lab's generator and receiver, usable on their own.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use lab::flows::{self, EndpointRange, Sizes};
use lab::traffic::{self, Backend, GenConfig, LiveConfig, Report};
use wire::MacAddr;

#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    AfPacket,
    AfXdp,
    /// rcv only: count in the kernel with an XDP program and drop.
    XdpSink,
    /// gen only: the kernel makes and sends the frames (an XDP program run by BPF_PROG_RUN in
    /// live-frames mode); a veth's peer needs NAPI (`ethtool -K PEER gro on`).
    XdpLive,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Backend {
        match b {
            BackendArg::AfPacket => Backend::AfPacket,
            BackendArg::AfXdp => Backend::AfXdp,
            BackendArg::XdpSink => Backend::XdpSink,
            BackendArg::XdpLive => Backend::XdpLive,
        }
    }
}

#[derive(clap::Args)]
pub struct GenArgs {
    /// Interface to send on.
    #[arg(short, long)]
    iface: String,
    /// Sources: ADDR[:PORT][-ADDR[:PORT]] [default: 198.18.10.1-198.18.10.20, port 2000;
    /// with --ipv6 2001:2:0:10::1-2001:2:0:10::14].
    #[arg(short, long)]
    src: Option<String>,
    /// Destinations: ADDR[:PORT][-ADDR[:PORT]] [default: 198.19.10.1-198.19.10.100, port
    /// 2000; with --ipv6 2001:2:0:20::1-2001:2:0:20::64]. Flows = sources x destinations.
    #[arg(short, long)]
    dst: Option<String>,
    /// Default address ranges are IPv6 (RFC 5180's 2001:2::/48).
    #[arg(short = '6', long)]
    ipv6: bool,
    /// Frame size without FCS [default: 60, the minimum; 62 for IPv6].
    #[arg(short = 'l', long, conflicts_with = "imix")]
    len: Option<usize>,
    /// Simple IMIX: 7:4:1 of 40/576/1500-byte IP packets.
    #[arg(long)]
    imix: bool,
    /// Rate limit in packets per second [default: as fast as possible].
    #[arg(short = 'R', long)]
    rate: Option<f64>,
    /// Send every frame with an 802.1Q tag of this VLAN id (1..=4094); the frame grows by the
    /// tag's 4 bytes.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=4094))]
    vlan: Option<u16>,
    /// Number of frames to send.
    #[arg(short = 'n', long, conflicts_with = "seconds")]
    count: Option<u64>,
    /// Seconds to send for [default: until Ctrl-C].
    #[arg(short = 't', long)]
    seconds: Option<f64>,
    /// Destination MAC (the next hop, e.g. the router's) [default: broadcast].
    #[arg(short = 'D', long)]
    dst_mac: Option<String>,
    /// Source MAC [default: the interface's].
    #[arg(short = 'S', long)]
    src_mac: Option<String>,
    #[arg(long, value_enum, default_value = "af-packet")]
    backend: BackendArg,
    /// xdp-live only: frames the kernel hands the driver at once (1..=256) [default: 64].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    batch: Option<u32>,
    /// xdp-live with --rate only: most frames per BPF_PROG_RUN call, the largest burst the
    /// receiver's ring gets at once (1..=256) [default: 256, veth's ring].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256), requires = "rate")]
    paced_step: Option<u32>,
    /// CPU to pin to.
    #[arg(long)]
    cpu: Option<usize>,
    /// One JSON object per second and a summary object as the last line.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct RcvArgs {
    /// Interface to count on.
    #[arg(short, long)]
    iface: String,
    /// Seconds to count for [default: until Ctrl-C].
    #[arg(short = 't', long)]
    seconds: Option<f64>,
    #[arg(long, value_enum, default_value = "af-packet")]
    backend: BackendArg,
    /// CPU to pin to.
    #[arg(long)]
    cpu: Option<usize>,
    /// One JSON object per second and a summary object as the last line.
    #[arg(long)]
    json: bool,
}

/// Frames per flush of the xdp-live generator.
const LIVE_BATCH: u32 = 64;

fn mac(text: &str) -> Result<MacAddr> {
    text.parse().map_err(|_| {
        anyhow::anyhow!(
            "{text:?} is not a MAC address (expected six hex bytes like 02:00:00:00:00:01)"
        )
    })
}

fn per_second(what: &'static str, json: bool) -> impl FnMut(usize, f64) {
    move |sec, pps| {
        if json {
            println!("{{\"second\":{sec},\"{what}_pps\":{pps}}}");
        } else {
            println!("{sec:>5} s  {pps:>12.0} pps {what}  ({:.3} Mpps)", pps / 1e6);
        }
    }
}

fn summary(what: &str, r: &Report, json: bool) {
    for note in &r.notes {
        eprintln!("{what}: note: {note}");
    }
    let pps = r.packets as f64 / r.elapsed.as_secs_f64().max(1e-9);
    if json {
        let v = serde_json::json!({
            what: r.packets, "bytes": r.bytes, "dropped": r.dropped, "seconds": r.elapsed.as_secs_f64(),
            "avg_pps": pps, "median_pps": traffic::run_value(&r.per_second), "per_second": r.per_second,
        });
        println!("{v}");
    } else {
        println!(
            "{what} {} packets ({} bytes) in {:.2} s: {:.0} pps average, {} dropped",
            r.packets,
            r.bytes,
            r.elapsed.as_secs_f64(),
            pps,
            r.dropped
        );
    }
}

pub fn gen_main(args: GenArgs) -> Result<()> {
    let (def_src, def_dst) = if args.ipv6 {
        ("2001:2:0:10::1-2001:2:0:10::14", "2001:2:0:20::1-2001:2:0:20::64")
    } else {
        ("198.18.10.1-198.18.10.20", "198.19.10.1-198.19.10.100")
    };
    let src = EndpointRange::parse(args.src.as_deref().unwrap_or(def_src), 2000)?;
    let dst = EndpointRange::parse(args.dst.as_deref().unwrap_or(def_dst), 2000)?;
    if !io::netdev::exists(&args.iface) {
        bail!("no interface named {:?} in this network namespace (check `ip link`)", args.iface);
    }
    let src_mac = match &args.src_mac {
        Some(m) => mac(m)?,
        None => {
            MacAddr(io::netdev::mac_address(&args.iface).context("reading the interface's MAC")?)
        }
    };
    let dst_mac = match &args.dst_mac {
        Some(m) => mac(m)?,
        None => {
            eprintln!(
                "gen: warning: no -D/--dst-mac given: sending to broadcast; a router will not forward such frames"
            );
            MacAddr::BROADCAST
        }
    };
    let sizes = if args.imix {
        Sizes::Imix
    } else {
        Sizes::Frame(args.len.unwrap_or(if src.first.is_ipv6() { 62 } else { 60 }))
    };
    if let Sizes::Frame(l) = sizes
        && !(60..=1514).contains(&l)
    {
        bail!("frame size {l} out of range 60..=1514 (Ethernet frame without FCS)");
    }
    if args.rate.is_some_and(|r| r.is_nan() || r <= 0.0) {
        bail!("--rate must be positive");
    }
    eprintln!(
        "gen: {} flows ({} x {}), {}, on {} via {:?}{}",
        src.len() * dst.len(),
        src.len(),
        dst.len(),
        match sizes {
            Sizes::Imix => "Simple IMIX".to_owned(),
            Sizes::Frame(l) => format!("{l}-byte frames"),
        },
        args.iface,
        Backend::from(args.backend),
        args.rate.map(|r| format!(", limited to {r:.0} pps")).unwrap_or_default()
    );
    let stop = crate::signals::stop_on_signals()?;
    let duration = args.seconds.map(Duration::from_secs_f64);
    if let BackendArg::XdpLive = args.backend {
        let flows = flows::live_flows(&src, &dst, sizes, src_mac, dst_mac, args.vlan)?;
        let batch = args.batch.unwrap_or(LIVE_BATCH);
        let paced_step = args.paced_step.unwrap_or(traffic::LIVE_PACED_STEP);
        let cfg = LiveConfig {
            iface: args.iface.clone(),
            flows,
            rate_pps: args.rate,
            count: args.count,
            duration,
            cpu: args.cpu,
            batch,
            paced_step,
        };
        let report = traffic::generate_live(&cfg, &stop, per_second("tx", args.json))?;
        summary("sent", &report, args.json);
        return Ok(());
    }
    if args.batch.is_some() || args.paced_step.is_some() {
        bail!("--batch and --paced-step are for the xdp-live backend only");
    }
    let mut set = flows::frames(&src, &dst, sizes, src_mac, dst_mac)?;
    if let Some(vid) = args.vlan {
        set.frames.iter_mut().for_each(|f| flows::tag_vlan(f, vid));
    }
    let cfg = GenConfig {
        iface: args.iface.clone(),
        backend: args.backend.into(),
        frames: set.frames,
        rate_pps: args.rate,
        count: args.count,
        duration,
        cpu: args.cpu,
    };
    let report = traffic::generate(&cfg, &stop, per_second("tx", args.json))?;
    summary("sent", &report, args.json);
    Ok(())
}

pub fn rcv_main(args: RcvArgs) -> Result<()> {
    if !io::netdev::exists(&args.iface) {
        bail!("no interface named {:?} in this network namespace (check `ip link`)", args.iface);
    }
    let stop = crate::signals::stop_on_signals()?;
    let report = traffic::receive(
        &args.iface,
        args.backend.into(),
        args.seconds.map(Duration::from_secs_f64),
        args.cpu,
        &stop,
        per_second("rx", args.json),
    )?;
    summary("received", &report, args.json);
    Ok(())
}
