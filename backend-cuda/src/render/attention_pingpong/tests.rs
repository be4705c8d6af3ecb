//! The register exchange's arithmetic, and a model of the kernel's synchronization (the
//! operations `prologue` and `consumer_loop` emit, per warpgroup, in order) run under many
//! interleavings: it must finish, pair every named-barrier arrival with a sync, and never
//! let an `mbarrier` run two phases ahead of a waiter.

use super::*;

#[test]
fn the_register_exchange_fits_the_blocks_registers() {
    for nc in 1..=3 {
        let entry = 128 * (nc + 1) * entry_regs(nc);
        let after = 128 * PRODUCER_REGS + 128 * nc * consumer_regs(nc);
        assert!(
            after <= entry && entry * min_blocks(nc) <= 65536,
            "nc {nc}: {after} registers after, {entry} at entry"
        );
        assert_eq!(consumer_regs(nc) % 8, 0);
        assert!((24..=256).contains(&consumer_regs(nc)) && consumer_regs(nc) > entry_regs(nc));
    }
    assert_eq!((entry_regs(1), consumer_regs(1)), (128, 216));
    assert_eq!((entry_regs(2), consumer_regs(2)), (168, 232));
    assert_eq!((entry_regs(3), consumer_regs(3)), (128, 152));
    assert_eq!(PRODUCER_REGS % 8, 0);
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ring {
    /// The K/V ring's `full` and `empty` barriers.
    Full,
    Empty,
    /// A persistent tile's schedule ring (two slots).
    SchedFull,
    SchedEmpty,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// `bar.sync` / `bar.arrive` on named barrier `id`.
    Sync(usize),
    Arrive(usize),
    /// Parity wait on `ring[s]`, carrying the phase it expects; one arrival on `ring[s]`.
    Wait(Ring, usize, u32),
    Done(Ring, usize),
}

/// The operations of each warpgroup (consumers `0 .. nc`, then the producer), as emitted, for a
/// block that runs work tiles of `tiles` key tiles each (`persistent`; else exactly one).
fn programs(nc: usize, stages: usize, tiles: &[usize], persistent: bool) -> Vec<Vec<Op>> {
    assert!(persistent || tiles.len() == 1);
    let mut out = Vec::new();
    let next = |w: usize| 1 + (w + 1) % nc;
    // Ping-pong turns: the fixed-grid tiles' consumers only (`consumer_loop`).
    let turns = nc > 1 && !persistent;
    let full = |g: usize| Op::Wait(Ring::Full, g % stages, (g / stages) as u32);
    for w in 0..nc {
        let mut p = Vec::new();
        let turn = |p: &mut Vec<Op>| {
            if turns {
                p.push(Op::Sync(1 + w));
                p.push(Op::Arrive(next(w)));
            }
        };
        if turns && w == nc - 1 {
            p.push(Op::Arrive(1));
        }
        let mut it = 0;
        for (i, &n) in tiles.iter().enumerate() {
            p.push(full(it));
            turn(&mut p);
            for kt in 0..n.saturating_sub(1) {
                p.push(full(it + kt + 1));
                turn(&mut p);
                p.push(Op::Done(Ring::Empty, (it + kt) % stages));
            }
            if persistent {
                p.push(Op::Wait(Ring::SchedFull, i % 2, (i / 2) as u32));
                p.push(Op::Done(Ring::SchedEmpty, i % 2));
            }
            if turns {
                p.push(Op::Sync(1 + w));
            }
            if persistent {
                p.push(Op::Done(Ring::Empty, (it + n - 1) % stages));
            }
            if turns && w + 1 < nc {
                p.push(Op::Arrive(next(w)));
            }
            it += n;
        }
        out.push(p);
    }
    let mut p = Vec::new();
    let mut it = 0;
    for (i, &n) in tiles.iter().enumerate() {
        for g in it..it + n {
            if g >= stages {
                p.push(Op::Wait(Ring::Empty, g % stages, (g / stages - 1) as u32));
            }
            p.push(Op::Done(Ring::Full, g % stages));
        }
        it += n;
        if persistent {
            if i >= 2 {
                p.push(Op::Wait(Ring::SchedEmpty, i % 2, (i / 2 - 1) as u32));
            }
            p.push(Op::Done(Ring::SchedFull, i % 2));
        }
    }
    out.push(p);
    out
}

/// Runs `progs` (of `nc` consumers and a ring of `stages`) with the order in which the
/// warpgroups move drawn from `seed`; `Err` says what went wrong.
fn simulate(progs: &[Vec<Op>], nc: usize, stages: usize, seed: u64) -> Result<(), String> {
    let mut pc = vec![0usize; progs.len()];
    // Named barriers: (syncing warpgroups waiting, arrivals) of the current phase.
    let mut named = vec![(0usize, 0usize); 2 + nc];
    let mut blocked = vec![None::<usize>; progs.len()]; // waiting on named barrier id
    // mbarriers per ring: (arrivals in the current phase, completed phases); the arrivals a
    // phase needs (the producer's one; one per consumer warpgroup).
    let rings = [Ring::Full, Ring::Empty, Ring::SchedFull, Ring::SchedEmpty];
    let size = |r: Ring| if matches!(r, Ring::Full | Ring::Empty) { stages } else { 2 };
    let count = |r: Ring| if matches!(r, Ring::Full | Ring::SchedFull) { 1 } else { nc };
    let mut bars: Vec<Vec<(usize, u32)>> = rings.iter().map(|&r| vec![(0usize, 0u32); size(r)]).collect();
    let idx = |r: Ring| rings.iter().position(|&x| x == r).unwrap();
    let mut rng = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let done = |pc: &[usize]| pc.iter().zip(progs.iter()).all(|(&i, p)| i == p.len());
    while !done(&pc) {
        let mut moved = false;
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let start = (rng >> 33) as usize % progs.len();
        for k in 0..progs.len() {
            let a = (start + k) % progs.len();
            if pc[a] == progs[a].len() || blocked[a].is_some() {
                continue;
            }
            let ok = match progs[a][pc[a]] {
                Op::Sync(id) | Op::Arrive(id) => {
                    let sync = matches!(progs[a][pc[a]], Op::Sync(_));
                    let b = &mut named[id];
                    if sync {
                        b.0 += 1;
                    } else {
                        b.1 += 1;
                    }
                    if b.0 + b.1 == 2 {
                        if b.0 != 1 {
                            return Err(format!("barrier {id} completed with {} syncs", b.0));
                        }
                        *b = (0, 0);
                        for w in blocked.iter_mut() {
                            if *w == Some(id) {
                                *w = None;
                            }
                        }
                    } else if sync {
                        blocked[a] = Some(id);
                    }
                    true
                }
                Op::Wait(r, s, phase) => {
                    let bar = bars[idx(r)][s];
                    if bar.1 > phase + 1 {
                        return Err(format!("{:?}: the barrier is {} phases ahead", progs[a][pc[a]], bar.1 - phase));
                    }
                    bar.1 == phase + 1
                }
                Op::Done(r, s) => {
                    let bar = &mut bars[idx(r)][s];
                    bar.0 += 1;
                    if bar.0 == count(r) {
                        *bar = (0, bar.1 + 1);
                    }
                    true
                }
            };
            if ok {
                pc[a] += 1;
                moved = true;
                break;
            }
        }
        if !moved {
            let at: Vec<String> = pc.iter().zip(progs.iter()).map(|(&i, p)| format!("{:?}", p.get(i))).collect();
            return Err(format!("deadlock: {at:?}"));
        }
    }
    if let Some((id, b)) = named.iter().enumerate().find(|(_, b)| **b != (0, 0)) {
        return Err(format!("barrier {id} left with {b:?} at the end"));
    }
    if blocked.iter().any(Option::is_some) {
        return Err("a warpgroup ended blocked".into());
    }
    Ok(())
}

#[test]
fn the_synchronization_never_deadlocks_and_balances() {
    for nc in 1..=3 {
        for stages in 2..=4 {
            for n in 1..=13 {
                for seed in 0..40 {
                    simulate(&programs(nc, stages, &[n], false), nc, stages, seed)
                        .unwrap_or_else(|e| panic!("{nc} consumers, {stages} stages, {n} tiles, seed {seed}: {e}"));
                }
            }
        }
    }
}

#[test]
fn the_persistent_schedule_never_deadlocks_and_balances() {
    // Work tiles of one key tile (the schedule ring runs ahead of the K/V ring), long ones,
    // and causal mixes, under many interleavings.
    let lists: [&[usize]; 6] = [&[1], &[1, 1, 1, 1, 1], &[5, 1, 3], &[16, 15, 14, 2, 1, 1], &[2; 7], &[3, 9, 1, 4]];
    for nc in 1..=3 {
        for stages in 2..=4 {
            for tiles in lists {
                for seed in 0..40 {
                    simulate(&programs(nc, stages, tiles, true), nc, stages, seed).unwrap_or_else(|e| {
                        panic!("{nc} consumers, {stages} stages, work tiles {tiles:?}, seed {seed}: {e}")
                    });
                }
            }
        }
    }
}

#[test]
fn the_model_catches_broken_schedules() {
    // Without warpgroup nc - 1's first arrival, warpgroup 0 never gets its turn.
    let mut p = programs(2, 3, &[4], false);
    assert!(matches!(p[1].remove(0), Op::Arrive(1)));
    assert!(simulate(&p, 2, 3, 0).unwrap_err().starts_with("deadlock"));
    // With its last arrival too, barrier 1 is left with an arrival nobody synced.
    let mut p = programs(2, 3, &[4], false);
    p[1].push(Op::Arrive(1));
    assert!(simulate(&p, 2, 3, 0).unwrap_err().contains("left with"));
    // One stage: the producer waits for the release of a tile whose P V needs the next tile.
    assert!(simulate(&programs(2, 1, &[4], false), 2, 1, 0).unwrap_err().starts_with("deadlock"));
    // A warpgroup arriving twice before the next one synced completes a phase without it.
    let mut p = programs(3, 3, &[3], false);
    p[0].insert(0, Op::Arrive(2));
    assert!((0..20).any(|seed| simulate(&p, 3, 3, seed).is_err()));
    // Persistent: without the release of a work tile's last key tile, the ring stalls on a later one.
    let mut p = programs(2, 2, &[1, 1, 1], true);
    let first = p[0].iter().position(|o| matches!(o, Op::Done(Ring::Empty, _))).unwrap();
    p[0].remove(first);
    assert!((0..20).any(|seed| simulate(&p, 2, 2, seed).is_err()));
    // Persistent: the consumers take no turns (none syncs or arrives on a named barrier), so an
    // arrival left in by mistake is never synced.
    let mut p = programs(2, 3, &[2, 2], true);
    assert!(p.iter().flatten().all(|o| !matches!(o, Op::Sync(_) | Op::Arrive(_))));
    let read = p[1].iter().position(|o| matches!(o, Op::Wait(Ring::SchedFull, ..))).unwrap();
    p[1].insert(read + 2, Op::Arrive(1)); // after the first tile's schedule read
    assert!(simulate(&p, 2, 3, 0).unwrap_err().contains("left with"));
    // Persistent: a consumer that does not read the schedule stalls the producer's third publication.
    let mut p = programs(1, 2, &[1, 1, 1, 1], true);
    let r = p[0].iter().position(|o| matches!(o, Op::Done(Ring::SchedEmpty, 0))).unwrap();
    p[0].remove(r);
    assert!(simulate(&p, 1, 2, 0).unwrap_err().starts_with("deadlock"));
}
