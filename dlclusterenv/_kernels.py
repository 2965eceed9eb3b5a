"""Compiled (numba) kernels for the engine's per-event arithmetic.

Why: every change of the rates paid ~40-60 numpy calls of ~1-2 us each (`speed.compute_rates`),
whatever the number of jobs; an exact incremental recomputation in Python was slower (README,
branch eng7). One compiled pass over the PlanStack's arrays does the same arithmetic without the
per-call overhead.

Bit-identical to the numpy code it replaced (tests/test_kernels.py keeps that code as an oracle;
the engine pins in tests/ check whole runs): every float operation is done in the same order on
the same operands. np.bincount with weights and np.add / maximum / minimum reductions and
reduceat run sequentially in index order, so they are loops here; np.sum is pairwise, so
`_pairwise` copies numpy's blocking (8 accumulators, blocks of 128, halves rounded to 8);
np.maximum / np.minimum propagate NaN, as `_mx` / `_mn` do; Python's min / max (used by the
water-filling and CFS code) keep their own tie rule; no fastmath. `x ** gamma` (GPU packing) is
left to numpy: numpy may compute it with SIMD (SVML) code whose last bit can differ from libm's
pow, so a kernel that meets a packed shared GPU hands the utilisations back and is called again
with numpy's factors (`rates`' status 1).

Compiled once per machine and cached (`cache=True`: next to this module, or numba's user cache
dir where the package is read-only); where no cache dir is writable the kernels are compiled in
each process instead of failing.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def _jit(f):
    """njit with an on-disk cache where one can be written, else without (never fails)."""
    try:
        return njit(cache=True)(f)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return njit(f)


# columns of speed.JobPlan.consts (speed.py imports these, so the two cannot disagree)
(NPS, NW, SYNC, OVERHEAD, UPDATE, PS_REF, UTIL, W_REF, TASK_TIME, MESSAGES, PHI, OMEGA,
 EVERY, XNODE, XRACK, GPU, ROW, SHARE) = range(18)


@_jit
def _mx(a, b):
    """np.maximum of two floats (NaN wins; on a tie the first)."""
    return a if (a >= b or a != a) else b


@_jit
def _mn(a, b):
    """np.minimum of two floats (NaN wins; on a tie the first)."""
    return a if (a <= b or a != a) else b


@_jit
def _block(a, lo, n):
    """numpy's pairwise sum of a[lo:lo + n] for n <= 128 (numpy/_core/src/umath/loops_utils.h)."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    m = n - n % 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@_jit
def _pairwise(a, lo, n):
    """numpy's pairwise sum of a[lo:lo + n], bit for bit: above 128 values, the sum of the two
    halves (the first rounded down to a multiple of 8). Walked with an explicit stack: a
    recursive function loaded from numba's cache crashed (segfault) here."""
    start = np.empty(64, np.int64)
    size = np.empty(64, np.int64)
    stage = np.zeros(64, np.int8)  # 0: new, 1: left half pushed, 2: right half pushed
    left = np.empty(64)
    sp = 0
    start[0], size[0], stage[0] = lo, n, 0
    val = 0.0
    while sp >= 0:
        n_sp = size[sp]
        if stage[sp] == 0 and n_sp <= 128:
            val = _block(a, start[sp], n_sp)  # returned to the frame below
            sp -= 1
            continue
        half = n_sp // 2
        half -= half % 8
        if stage[sp] == 0:
            stage[sp] = 1
            sp += 1
            start[sp], size[sp], stage[sp] = start[sp - 1], half, 0
        elif stage[sp] == 1:
            left[sp] = val
            stage[sp] = 2
            sp += 1
            start[sp], size[sp], stage[sp] = start[sp - 1] + half, n_sp - half, 0
        else:
            val = left[sp] + val
            sp -= 1
    return val


@_jit
def pairwise_sum(a):
    """np.sum of a 1-d float array, bit for bit."""
    return _pairwise(a, 0, len(a))


@_jit
def _waterfill(capacity, caps):
    """speed.waterfill: max-min fair split of `capacity` among claimants wanting at most `caps`."""
    n = len(caps)
    out = np.zeros(n)
    order = np.argsort(caps, kind="mergesort")  # stable, as numpy's kind="stable"
    left = capacity
    for k in range(n):
        i = order[k]
        share = left / (n - k)
        give = share if share < caps[i] else caps[i]  # Python's min(caps[i], share)
        out[i] = give
        left -= give
    return out


@_jit
def _cpu_split(capacity, want, limit):
    """Soft, work-conserving limits: fair share up to each limit, then the rest to whoever wants."""
    if pairwise_sum(want) <= capacity:
        return want.copy()
    n = len(want)
    first_caps = np.empty(n)
    for i in range(n):
        first_caps[i] = _mn(want[i], limit[i] * capacity)
    first = _waterfill(capacity, first_caps)
    rest = capacity - pairwise_sum(first)
    if rest > 1e-12:
        more = _waterfill(rest, want - first)
        for i in range(n):
            first[i] += more[i]
    return first


@_jit
def _node_runs(task_node, contended):
    """Each contended node's tasks in task order: node contended[c]'s are by_node[lo[c]:hi[c]]."""
    by_node = np.argsort(task_node, kind="mergesort")
    lo = np.searchsorted(task_node[by_node], contended)
    hi = lo.copy()
    for c in range(len(contended)):
        while hi[c] < len(task_node) and task_node[by_node[hi[c]]] == contended[c]:
            hi[c] += 1
    return by_node, lo, hi


@_jit
def gather(index, pool_consts, with_consts, task_node, is_worker, want, limit, w_gpu, w_compute, links, nbytes,
           flows):
    """speed.PlanStack's arrays from its pools: each job's rows of each kind (offset and count in
    `index` rows 0-5, its consts row in row 6), concatenated in job order (plain copies); the
    consts rows too where `with_consts` (else an empty array)."""
    n = index.shape[1]
    nt = 0
    nw = 0
    ne = 0
    for j in range(n):
        nt += index[1, j]
        nw += index[3, j]
        ne += index[5, j]
    n_c = pool_consts.shape[1] if with_consts else 0
    k = np.empty((n if with_consts else 0, n_c))
    tn = np.empty(nt, np.int64)
    iw = np.empty(nt, np.bool_)
    wa = np.empty(nt)
    li = np.empty(nt)
    wg = np.empty(nw, np.int64)
    wc = np.empty(nw)
    lk = np.empty(ne, np.int64)
    nb = np.empty(ne)
    fl = np.empty(ne)
    t = 0
    w = 0
    e = 0
    for j in range(n):
        r = index[6, j]
        for c in range(n_c):
            k[j, c] = pool_consts[r, c]
        lo = index[0, j]
        for i in range(index[1, j]):
            tn[t] = task_node[lo + i]
            iw[t] = is_worker[lo + i]
            wa[t] = want[lo + i]
            li[t] = limit[lo + i]
            t += 1
        lo = index[2, j]
        for i in range(index[3, j]):
            wg[w] = w_gpu[lo + i]
            wc[w] = w_compute[lo + i]
            w += 1
        lo = index[4, j]
        for i in range(index[5, j]):
            lk[e] = links[lo + i]
            nb[e] = nbytes[lo + i]
            fl[e] = flows[lo + i]
            e += 1
    return k, tn, iw, wa, li, wg, wc, lk, nb, fl


@_jit
def rates(cpus, cpu_cap, cap, gpu_node, gpu_mode, n_gpus, ib, latency_s, rpc_s, cpu_switch_s,
          sched_latency_s, min_granularity_s, switch, server, index, consts, pool_task_node,
          pool_is_worker, pool_want, pool_limit, pool_w_gpu, pool_w_compute, pool_links, pool_nbytes,
          pool_flows, packed):
    """speed.compute_rates' arithmetic over a PlanStack (the model is explained there): its
    pools and index (`gather`); consts are read at each job's pool row.

    Returns (status, speed, cross_node, cross_rack, gpus, link_Bps, cpu_used, gpu_busy, got,
    gpus_busy, cores_used, nic_Bps, util_w, on_packed, rows, shares): rows and shares are the
    jobs' ROW and SHARE consts. Status 1: a worker shares a GPU set to pack and `packed` is
    empty; nothing else is computed, util_w holds each worker's GPU's summed utilisation and
    on_packed flags those workers: call again with each worker's packed factor.
    """
    crow = index[6]  # each job's consts row (the stack's consts[j] is consts[crow[j]])
    _, task_node, is_worker, want, limit, w_gpu, w_compute, links, nbytes, flows = gather(
        index, consts, False, pool_task_node, pool_is_worker, pool_want, pool_limit, pool_w_gpu,
        pool_w_compute, pool_links, pool_nbytes, pool_flows)
    entry_counts = index[5]
    n = len(cpus)
    n_link = len(cap)
    n_jobs = index.shape[1]
    n_t = len(task_node)
    n_wk = len(w_gpu)
    e0 = np.zeros(0)
    b0 = np.zeros(0, np.bool_)
    n_ps = np.empty(n_jobs, np.int64)
    n_w = np.empty(n_jobs, np.int64)
    any_ps = False
    all_sync = True
    for j in range(n_jobs):
        n_ps[j] = np.int64(consts[crow[j], NPS])
        n_w[j] = np.int64(consts[crow[j], NW])
        if n_ps[j] != 0:
            any_ps = True
        if not consts[crow[j], SYNC] > 0:
            all_sync = False
    w_job = np.empty(n_wk, np.int64)  # each worker's job, in job order
    w_end = np.empty(n_jobs + 1, np.int64)
    w_end[0] = 0
    for j in range(n_jobs):
        w_end[j + 1] = w_end[j] + n_w[j]
        for i in range(w_end[j], w_end[j + 1]):
            w_job[i] = j

    # ---- CPU: max-min fair shares with soft limits where a node is contended
    total = np.zeros(n)
    for i in range(n_t):
        total[task_node[i]] += want[i]
    contended = np.flatnonzero(total > cpu_cap)
    got = want.copy()
    if len(contended):
        by_node, lo, hi = _node_runs(task_node, contended)
        for c in range(len(contended)):
            node = contended[c]
            sel = by_node[lo[c]:hi[c]]
            part = _cpu_split(cpus[node], want[sel], limit[sel])
            for q in range(len(sel)):
                got[sel[q]] = part[q]
        cpu_used = np.zeros(n)
        for i in range(n_t):
            cpu_used[task_node[i]] += got[i]
    else:
        cpu_used = total
    # cores turned into work, less context switching on contended nodes (speed.cpu_contention)
    eff = got
    if cpu_switch_s > 0 and len(contended):
        eff = got.copy()
        by_node, lo, hi = _node_runs(task_node, contended)
        for c in range(len(contended)):
            k = 0
            for q in range(lo[c], hi[c]):
                i = by_node[q]
                if got[i] < want[i] * (1 - 1e-9):
                    k += 1
            if k >= 2:
                slice_s = sched_latency_s / k
                if min_granularity_s > slice_s:  # Python's max(latency / k, granularity)
                    slice_s = min_granularity_s
                keep = 1.0 - cpu_switch_s / slice_s
                if 0.0 > keep:
                    keep = 0.0
                for q in range(lo[c], hi[c]):
                    eff[by_node[q]] *= keep

    # ---- PS factor: the most CPU-starved PS of each job (only where a node is contended)
    ps_f = np.ones(n_jobs)
    if any_ps and len(contended):
        j = 0
        seen = 0  # PS tasks of job j met so far (a job's PS come first among its tasks)
        for i in range(n_t):
            if is_worker[i]:
                continue
            while seen >= n_ps[j]:
                j += 1
                seen = 0
            seen += 1
            ref = consts[crow[j], PS_REF]
            ratio = _mn(1.0, eff[i] / _mx(ref, 1e-300)) if ref > 0 else 1.0
            ps_f[j] = _mn(ps_f[j], ratio)
        for j in range(n_jobs):
            ps_f[j] = _mx(ps_f[j], 1e-9)

    # ---- workers: GPU share (alone / time-sliced / packed) or CPU cores over the reference
    all_gpu = n_wk > 0
    top = 0
    for i in range(n_wk):
        if w_gpu[i] < 0:
            all_gpu = False
        elif w_gpu[i] > top:
            top = w_gpu[i]
    n_slots = max(n_gpus, top + 1)
    cnt = np.zeros(n_slots, np.int64)
    for i in range(n_wk):
        if w_gpu[i] >= 0:
            cnt[w_gpu[i]] += 1
    alone = all_gpu and cnt.max() <= 1
    if alone:  # each on a GPU of its own: its factor is 1 (x / 1.0 is x)
        c_w = w_compute
    else:
        util_sum = np.zeros(n_slots)
        for i in range(n_wk):
            if w_gpu[i] >= 0:
                util_sum[w_gpu[i]] += consts[crow[w_job[i]], UTIL]
        mode = np.zeros(n_slots, np.int8)
        for s in range(min(len(gpu_mode), n_slots)):
            mode[s] = gpu_mode[s]
        need = False
        for i in range(n_wk):
            gi = w_gpu[i]
            if gi >= 0 and mode[gi] == 1 and cnt[gi] >= 2:
                need = True
        if need and len(packed) == 0:
            util_w = np.empty(n_wk)
            on_packed = np.zeros(n_wk, np.bool_)
            for i in range(n_wk):
                gi = w_gpu[i] if w_gpu[i] >= 0 else 0
                util_w[i] = util_sum[gi]
                on_packed[i] = w_gpu[i] >= 0 and mode[gi] == 1 and cnt[gi] >= 2
            return (1, e0, e0, e0, e0, e0, e0, b0, e0, 0.0, 0.0, 0.0, util_w, on_packed,
                    np.zeros(0, np.int64), e0)
        share = np.empty(n_wk)
        for i in range(n_wk):
            gi = w_gpu[i] if w_gpu[i] >= 0 else 0
            share[i] = max(cnt[gi], 1)
        if server:  # a node's time-sliced workers rotate over its time-sliced GPUs
            pool = np.arange(n_slots) + n
            pool[:n_gpus] = gpu_node
            t_n = np.zeros(pool.max() + 1)
            g_n = np.zeros(pool.max() + 1)
            for s in range(n_slots):
                if mode[s] == 0:
                    t_n[pool[s]] += cnt[s]
                    if cnt[s] > 0:
                        g_n[pool[s]] += 1.0
                else:
                    t_n[pool[s]] += 0.0
                    g_n[pool[s]] += 0.0
            for i in range(n_wk):
                gi = w_gpu[i]
                if gi >= 0 and mode[gi] == 0:
                    share[i] = t_n[pool[gi]] / _mx(g_n[pool[gi]], 1.0)
        c_w = np.empty(n_wk)
        wt = 0  # the task index of worker i
        for i in range(n_wk):
            while not is_worker[wt]:
                wt += 1
            gi = w_gpu[i]
            if gi >= 0:
                if share[i] == 1:
                    f = 1.0
                elif mode[gi] == 1:
                    f = packed[i]
                else:
                    f = switch / share[i]
            else:
                w_ref = consts[crow[w_job[i]], W_REF]
                f = eff[wt] / w_ref if w_ref > 0 else 1.0
            c_w[i] = w_compute[i] / _mx(f, 1e-9)
            wt += 1

    # ---- links: each link direction shared equally per flow; a job's busiest NIC or uplink
    # (or its slowest capped connection) plus its busiest host path
    flows_total = np.zeros(n_link)
    for e in range(len(links)):
        flows_total[links[e]] += flows[e]
    net = np.zeros(n_jobs)
    host = np.zeros(n_jobs)
    e = 0
    for j in range(n_jobs):
        first = True
        for q in range(e, e + entry_counts[j]):
            link = links[q]
            t = (nbytes[q] * flows_total[link] / cap[link]) / flows[q]
            tn = t if link < ib else 0.0
            th = 0.0 if link < ib else t
            if first:
                net[j], host[j] = tn, th
                first = False
            else:
                net[j] = _mx(net[j], tn)
                host[j] = _mx(host[j], th)
        e += entry_counts[j]

    # ---- step time and speeds
    s = np.empty(n_jobs)
    moved = np.empty(n_jobs)
    comm = np.empty(n_jobs)
    upd = np.zeros(n_jobs)
    rpc = np.zeros(n_jobs)
    for j in range(n_jobs):
        lo, hi = w_end[j], w_end[j + 1]
        if hi == lo:  # no worker: np.maximum.reduceat's value for an empty run
            if lo >= n_wk:
                raise IndexError("a running job without workers at the end of the stack")
            slowest = c_w[lo]
        else:
            slowest = c_w[lo]
            for i in range(lo + 1, hi):
                slowest = _mx(slowest, c_w[i])
        comm[j] = (_mx(net[j], consts[crow[j], TASK_TIME]) + host[j]) + latency_s * consts[crow[j], MESSAGES]
        overhead = consts[crow[j], OVERHEAD]
        if any_ps:
            # the RPCs and the PS update happen once per exchange, every k steps
            every = consts[crow[j], EVERY]
            rpc[j] = rpc_s * np.float64(n_ps[j] + n_w[j] if n_ps[j] > 0 else 0) / every
            u = consts[crow[j], UPDATE] / np.float64(max(n_ps[j], 1))
            if len(contended):
                u = u / ps_f[j]
            upd[j] = (u if n_ps[j] > 0 else 0.0) / every
            x_sync = comm[j] + upd[j] * np.float64(n_w[j])
            t_fixed = slowest + overhead + rpc[j]
        else:
            x_sync = comm[j]
            t_fixed = slowest + overhead
        t_sync = t_fixed + x_sync - _mn(consts[crow[j], PHI] * slowest, consts[crow[j], OMEGA] * x_sync)
        if all_sync or consts[crow[j], SYNC] > 0:
            s[j] = np.float64(n_w[j]) / t_sync
        else:  # async workers run their own loops; the job's speed is the sum of their rates
            acc = 0.0
            for i in range(lo, hi):
                x_w = comm[j] + upd[j] if any_ps else comm[j]
                fixed_w = overhead + rpc[j] if any_ps else overhead
                per = c_w[i] + fixed_w + x_w - _mn(consts[crow[j], PHI] * c_w[i], consts[crow[j], OMEGA] * x_w)
                acc = 1.0 / per if i == lo else acc + 1.0 / per
            s[j] = acc
        moved[j] = s[j] / np.float64(n_w[j])
    xn = np.empty(n_jobs)
    xr = np.empty(n_jobs)
    gpus = np.empty(n_jobs)
    for j in range(n_jobs):
        xn[j] = consts[crow[j], XNODE] * moved[j]
        xr[j] = consts[crow[j], XRACK] * moved[j]
        gpus[j] = np.float64(n_w[j]) * consts[crow[j], GPU]
    link_Bps = np.zeros(n_link)
    e = 0
    for j in range(n_jobs):
        for q in range(e, e + entry_counts[j]):
            link_Bps[links[q]] += nbytes[q] * moved[j]
        e += entry_counts[j]
    led_rows = np.empty(n_jobs, np.int64)  # the engine's columns (sim._Epoch)
    shares = np.empty(n_jobs)
    for j in range(n_jobs):
        led_rows[j] = np.int64(consts[crow[j], ROW])
        shares[j] = consts[crow[j], SHARE]
    gpu_busy = cnt[:n_gpus] > 0
    busy = 0
    for g in range(n_gpus):
        if gpu_busy[g]:
            busy += 1
    return (0, s, xn, xr, gpus, link_Bps, cpu_used, gpu_busy, got, np.float64(busy),
            pairwise_sum(cpu_used), _pairwise(link_Bps, 0, min(2 * n, n_link)), e0, b0, led_rows,
            shares)


@_jit
def seed_state(entropy):
    """numpy.random.SeedSequence(...).generate_state(4, np.uint64) as eight 32-bit words (least
    significant half of each first), from the sequence's assembled entropy words (run entropy
    padded to 4 words where a spawn key follows, then the spawn key's): O'Neill's seed_seq
    alternative as numpy implements it (a pool of 4 words mixed with hashmix and mix, then read
    out with a second hash). In 64-bit words masked to 32 bits: every product of two 32-bit
    values fits, and a difference wraps mod 2^64, so masking gives C's uint32 arithmetic.
    Checked word for word against numpy's SeedSequence (tests/test_loss_release.py)."""
    m = np.uint64(0xFFFFFFFF)
    mult_a = np.uint64(0x931E8875)
    mult_b = np.uint64(0x58F38DED)
    mix_l = np.uint64(0xCA01F9DD)
    mix_r = np.uint64(0x4973F715)
    sh = np.uint64(16)
    h = np.uint64(0x43B0D7E5)
    pool = np.zeros(4, np.uint64)
    n = len(entropy)
    for i in range(4):  # hashmix(entropy[i]), 0 past its end
        v = entropy[i] if i < n else np.uint64(0)
        v ^= h
        h = (h * mult_a) & m
        v = (v * h) & m
        v ^= v >> sh
        pool[i] = v
    for i_src in range(n if n > 4 else 4):  # every pool word into the others, then the rest
        for i_dst in range(4):
            if i_src < 4 and i_src == i_dst:
                continue
            v = pool[i_src] if i_src < 4 else entropy[i_src]
            v ^= h
            h = (h * mult_a) & m
            v = (v * h) & m
            v ^= v >> sh
            r = (mix_l * pool[i_dst] - mix_r * v) & m
            r ^= r >> sh
            pool[i_dst] = r
    out = np.empty(8, np.uint64)
    h = np.uint64(0x8B51F9DD)
    for i in range(8):
        v = pool[i % 4]
        v ^= h
        h = (h * mult_b) & m
        v = (v * h) & m
        v ^= v >> sh
        out[i] = v
    return out


@_jit
def integrate(data, cols, rows, speed, eff, dt, observed, speed_o, gpus, xnode, xrack, shares, xnode_total,
              xrack_total):
    """sim._integrate's per-job arithmetic, in place on the Ledger's rows (data[rows], columns
    `cols` in Ledger.COLUMNS' order): work gained (speed, times the efficiency `eff` where given,
    times dt, capped at the job's total), run time, GPU-seconds, bytes across NICs and racks,
    dominant share x dt (where `shares` is given), and for the `observed` jobs (positions in
    rows, with their speeds `speed_o`) the biased speed measured and its time-weighted mean, and
    the work where unqueued epochs began. Returns the engine's byte totals with this interval's
    bytes added one job after the other (np.cumsum's order)."""
    steps, run, gpu, xn, xr, dom, last, obs_mean, obs_time, total, bias, mark = (
        cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], cols[9], cols[10],
        cols[11])
    for q in range(len(observed)):  # before the work moves: `mark` takes the work before
        r = rows[observed[q]]
        measured = speed_o[q] * data[r, bias]
        w = data[r, obs_time]
        m = data[r, mark]
        data[r, obs_mean] = (data[r, obs_mean] * w + measured * dt) / (w + dt)
        data[r, last] = measured
        data[r, obs_time] = w + dt
        if m != m:
            data[r, mark] = data[r, steps]
    with_eff = len(eff) > 0
    with_dom = len(shares) > 0
    for i in range(len(rows)):
        r = rows[i]
        gained = speed[i] * eff[i] * dt if with_eff else speed[i] * dt
        data[r, steps] = _mn(data[r, steps] + gained, data[r, total])
        data[r, run] += dt
        data[r, gpu] += gpus[i] * dt
        a = xnode[i] * dt
        b = xrack[i] * dt
        data[r, xn] += a
        data[r, xr] += b
        xnode_total += a
        xrack_total += b
        if with_dom:
            data[r, dom] += shares[i] * dt
    return xnode_total, xrack_total
