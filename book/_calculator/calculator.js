/* The live calculator of book/calculator.md: llm_roofline.estimate, in the browser.
 *
 * Every count comes from calculator-data.js, which `make book` generates with
 * llm_roofline.course.webcalc: per built-in model, each operation's (FLOPs, weight elements, KV-cache
 * elements) of a forward pass as JavaScript functions of (B, n_new, n_past), printed by SymPy
 * from formulas.py; per op its kernel and which peak that kernel's math runs at (the body's,
 * the LM head's, the attention's, or none for element-wise work: Setup.math_dtype); per
 * tensor-parallel degree each op's share; per accelerator its peaks, bandwidth, memory, the
 * collectives' time and their least cost; element sizes; estimate()'s defaults (the prefill's
 * chunk, the reserve, the queue); the library's error messages.
 *
 * Written here by hand, and only this (the part of llm_roofline.calculator that assembles):
 *   1. kernels(): an op's per-GPU FLOPs and bytes are its counts times its share, weights at
 *      the body's or the 16-bit head's size, the cache at the KV size; ops of one fused kernel
 *      (ATTENTION_KERNEL: kv_read, attn_scores, attn_values) are summed (Setup.pass_costs).
 *   2. A kernel's time is max(FLOPs / (its peak * MFU), bytes / (bandwidth * MBU)), its peak
 *      the body's compute precision, the LM head's or the attention's, infinite for element-wise
 *      work (norms, RoPE, residuals, the activation, softmax...: fused, priced by its bytes
 *      alone; Setup.peak_of). The kernel-by-kernel time of a pass is the sum over its kernels
 *      plus the 2L + 2 collectives of tensor parallelism one after another: two all-reduces per
 *      layer, the embedding's, and the logits' all-gather (Setup.roofline_s, allreduce_s).
 *   3. The prefill (TTFT) runs in passes of at most the default prefill_chunk tokens
 *      (prefillPasses, Setup.prefill_passes): a prompt that fits in a chunk is never split, each
 *      pass packing floor(chunk / prompt_len) whole prompts and the last the rest; a longer
 *      prompt runs alone in ceil(prompt_len / chunk) pieces, each after the cache of the pieces
 *      before it, only the last computing logits (the others skip the LM head). Every pass reads
 *      the weights again and runs its own collectives; each kernel's FLOPs, bytes and per-pass
 *      times, the collectives' times, least costs and bytes are summed over the passes
 *      (calculator._prefill). The LM head runs on each prompt's last position only.
 *   4. TPOT is the exact mean over the output_len - 1 decode steps (contexts prompt_len + 1 ...):
 *      between the exported breaks every kernel's FLOPs and bytes are affine in the context, so
 *      the mean of its max over each segment has a closed form (meanOfMax, the library's
 *      _mean_of_max); the segments' means are weighted by their steps. This equals the library's
 *      step-by-step sum, which it uses when a sliding window fills mid-way.
 *   5. The floor of a phase (busy(), calculator._busy): the largest busy time of the math units
 *      (sum of FLOPs / peak), the memory (sum of bytes / bandwidth), the link and the network
 *      (the collectives at their least cost, Setup.allreduce_floor, for the prefill summed over
 *      its passes), plus the collectives' latencies where every pass holds one sequence (else
 *      they only join the max); the resource with the largest is the limit. TPOT's floor is
 *      the exact mean of each step's floor: per segment between the breaks the mean of the
 *      upper envelope of affine lines (meanOfEnvelope, calculator._mean_of_envelope; the
 *      library's _decode_floor).
 *   6. Memory per GPU: weights + KV cache at the final context + activations (one layer's for
 *      the largest prefill pass, prefillPassTokens = deployment.prefill_pass_tokens:
 *      min(B, floor(chunk / L)) L tokens for a prompt of L <= chunk, else chunk; and the last
 *      fp32 logits) against capacity less the reserve (_memory).
 *   7. Checks in the library's order, each answered with the library's own message.
 *   8. With dp > 1 (estimateDp): parallel.dp_ep_estimate's data-parallel attention x expert
 *      parallelism, the same kernels at n_gpus = 1 for the busiest GPU's ceil(batch / dp)
 *      sequences, its routed experts reading what all dp GPUs' tokens touch, per MoE layer an
 *      all-to-all (floor: a copy per distinct remote GPU; kernel by kernel: a copy per pair).
 * tests/test_calculator_page.py (in Chromium) and tests/test_webcalc.py (under node) compare every
 * number with estimate() (dp_ep_estimate() for dp > 1) for random settings.
 */
(function (root) {
  "use strict";
  const D = root.LLM_CALC_DATA;

  // ---------------------------------------------------------------- the arithmetic (pure)
  class CalcError extends Error {}

  function kernels(m, tp, sizes, fn, B, nNew, nPast, logitsTokens) {
    const rows = fn(B, nNew, nPast);
    if (logitsTokens !== undefined) {  // the LM head and the sampler run where logits are kept
      const head = fn(logitsTokens, 1, 0);
      for (const op of ["lm_head", "sampling"]) rows[m.ops.indexOf(op)] = head[m.ops.indexOf(op)];
    }
    const out = new Map();
    rows.forEach(([f, w, kv], i) => {
      const share = tp.shares[i];
      const part = [f * share, w * (m.head[i] ? sizes.head : sizes.weight) * share,
        kv * sizes.kv * share];
      const k = m.kernels[i], acc = out.get(k);
      out.set(k, acc ? acc.map((a, j) => a + part[j]) : part);
    });
    return new Map([...out].map(([k, [f, w, kv]]) => [k, [f, w + kv]]));
  }

  function meanOfMax(m0, m1, c0, c1, n) {  // calculator._mean_of_max, for scalars
    const g0 = c0 - m0;
    const slope = ((c1 - m1) - g0) / Math.max(n - 1, 1);
    const crossing = slope !== 0 ? -g0 / slope : 0;
    const clip = (x) => Math.min(Math.max(x, 0), n);
    const prefix = clip(Math.ceil(crossing)), start = clip(Math.floor(crossing) + 1);
    const count = slope < 0 ? (g0 > 0 ? prefix : 0) : slope > 0 ? n - start : (g0 > 0 ? n : 0);
    const first = slope > 0 ? g0 + slope * start : g0;
    const excess = count * first + slope * count * (count - 1) / 2;
    return (n > 1 ? (m0 + m1) / 2 : m0) + excess / n;
  }

  function meanOfEnvelope(lines, n) {  // calculator._mean_of_envelope, for scalars
    const span = Math.max(n - 1, 1), a = lines.map((l) => l[0]),
      slope = lines.map(([v0, v1]) => (v1 - v0) / span), cuts = [0, n];
    for (let i = 0; i < a.length; i++) {
      for (let j = i + 1; j < a.length; j++) {
        const ds = slope[i] - slope[j];
        cuts.push(Math.min(Math.max(ds !== 0 ? (a[j] - a[i]) / ds : 0, 0), n));
      }
    }
    cuts.sort((x, y) => x - y);
    let total = 0;
    for (let c = 1; c < cuts.length; c++) {  // one line is the max between two crossings
      const lo = cuts[c - 1], hi = cuts[c], j0 = Math.ceil(lo),
        count = Math.max(Math.ceil(hi) - j0, 0), mid = (lo + hi) / 2;
      let best = 0;
      for (let i = 1; i < a.length; i++) if (a[i] + slope[i] * mid > a[best] + slope[best] * mid) best = i;
      total += count * a[best] + slope[best] * (count * j0 + count * (count - 1) / 2);
    }
    return total / n;
  }

  /* Per kernel the mean [FLOPs, bytes, time] over the decode steps, and the mean of the steps'
   * max(math, memory, flat) (the floor before its added latency). */
  function decodeMeans(m, tp, sizes, fn, b, p, steps, peakOf, bw, flat, adjust) {
    const pass = (nPast) => (adjust || ((k) => k))(kernels(m, tp, sizes, fn, b, 1, nPast));
    // segments [a, z] of cached lengths p .. p + steps - 1, cut after each break
    const last = p + steps - 1, cuts = m.breaks.filter((x) => x >= p && x < last);
    const ends = [...cuts, last], sums = new Map();
    let a = p, envelope = 0;
    for (const z of ends) {
      const n = z - a + 1, k0 = pass(a), k1 = pass(z);
      const math = [0, 0], memory = [0, 0];
      for (const [k, [f0, m0]] of k0) {
        const [f1, m1] = k1.get(k), peak = peakOf(k);
        const t = meanOfMax(m0 / bw, m1 / bw, f0 / peak, f1 / peak, n);
        const acc = sums.get(k) || [0, 0, 0];
        sums.set(k, [acc[0] + n * (f0 + f1) / 2, acc[1] + n * (m0 + m1) / 2, acc[2] + n * t]);
        math[0] += f0 / peak; math[1] += f1 / peak; memory[0] += m0 / bw; memory[1] += m1 / bw;
      }
      envelope += n * meanOfEnvelope([math, memory, [flat, flat]], n);
      a = z + 1;
    }
    return [new Map([...sums].map(([k, v]) => [k, v.map((x) => x / steps)])), envelope / steps];
  }

  /* calculator._busy: each resource's busy time in a phase, its floor and the resource that
   * sets it. collectives: [link, network, latency] (Setup.allreduce_floor, summed over the
   * passes); single (every pass holds one sequence) adds the latency to the floor, else it only
   * joins the max. */
  function busy(compute, memory, [link, network, latency], single, kernelByKernel, floor) {
    const added = single ? latency : 0;
    const terms = {compute, memory, interconnect: link, network, latency: latency - added};
    let limit = "compute";
    for (const k in terms) if (terms[k] > terms[limit]) limit = k;
    return {compute, memory, interconnect: link, network, latency, latency_added: added,
      floor: floor === undefined ? terms[limit] + added : floor,
      kernel_by_kernel: kernelByKernel, limit};
  }

  /* Setup.prefill_passes: the passes of a prefill in chunks of at most `chunk` tokens, as groups
   * {count, batch, nNew, nPast, logits} of identical passes (groups of no pass left out). A
   * prompt that fits in a chunk is never split: each pass packs floor(chunk / p) whole prompts,
   * the last pass the rest. A longer prompt runs alone in ceil(p / chunk) passes, piece j adding
   * min(chunk, p - j chunk) tokens after j chunk cached ones, the last piece its logits. */
  function prefillPasses(b, p, chunk) {
    if (p <= chunk) {
      const perPass = Math.max(Math.floor(chunk / Math.max(p, 1)), 1),
        full = Math.floor(b / perPass), rest = b % perPass, groups = [];
      if (full > 0) groups.push({count: full, batch: perPass, nNew: p, nPast: 0, logits: perPass});
      if (rest > 0) groups.push({count: 1, batch: rest, nNew: p, nPast: 0, logits: rest});
      return groups;
    }
    const pieces = Math.ceil(p / chunk), groups = [];
    for (let j = 0; j < pieces; j++) {
      groups.push({count: b, batch: 1, nNew: Math.min(chunk, p - j * chunk), nPast: j * chunk,
        logits: j === pieces - 1 ? 1 : 0});
    }
    return groups;
  }

  /* deployment.prefill_pass_tokens: the tokens of the largest pass, whose activations vram sizes */
  function prefillPassTokens(b, p, chunk) {
    return p <= chunk ? Math.min(b, Math.max(Math.floor(chunk / Math.max(p, 1)), 1)) * p : chunk;
  }

  function pyRepr(raw, x) {  // how Python's repr names the bad value the library was given
    if (/^\s*[-+]?\d+\s*$/.test(raw)) return String(BigInt(raw.trim()));
    if (Number.isFinite(x)) return Number.isInteger(x) ? x.toFixed(1) : String(x);
    return "'" + raw + "'";
  }

  function count(field, raw) {  // validate.integers: a whole number from 1 to 2**40
    const x = Number(String(raw).trim() === "" ? NaN : raw);
    if (!(Number.isFinite(x) && Number.isInteger(x) && x >= 1 && x <= 2 ** 40)) {
      throw new CalcError(D.messages[field].replace("{}", pyRepr(String(raw), x)));
    }
    return x;
  }

  function fraction(field, raw) {  // validate.fraction: from 0.001 to 1
    const x = Number(String(raw).trim() === "" ? NaN : raw);
    if (!(Number.isFinite(x) && x >= 1e-3 && x <= 1)) {
      const shown = Number.isFinite(x) ? (Number.isInteger(x) ? x.toFixed(1) : String(x))
        : "'" + raw + "'";
      throw new CalcError(D.messages[field].replace("{}", shown));
    }
    return x;
  }

  function phaseRows(costs, times, mathOf, peakOf, bw, extra, arBytes, n) {  // calculator._rows
    let total = 0;
    for (const t of times.values()) total += t;
    total += extra;
    const rows = [];
    for (const [k, [f, mv]] of costs) {
      if (!(f > 0 || mv > 0)) continue;
      const t = times.get(k), math = mathOf(k);
      rows.push({op: k, flops: f, bytes: mv, intensity: mv > 0 ? f / mv : null, time_s: t, math,
        bound: math === null ? "element-wise" : f / peakOf(k) >= mv / bw ? "compute" : "memory",
        share: t / total});
    }
    if (n > 1) {
      rows.push({op: "allreduce", flops: 0, bytes: arBytes, intensity: null, time_s: extra,
        bound: "interconnect", share: extra / total});
    }
    return rows;
  }

  function bound(costs, times, peakOf, bw) {  // calculator._step_bound (element-wise: memory)
    let compute = 0, memory = 0;
    for (const [k, [f, mv]] of costs) {
      if (f / peakOf(k) >= mv / bw) compute += times.get(k); else memory += times.get(k);
    }
    return compute >= memory ? "compute" : "memory";
  }

  /* llm_roofline.estimate for one setting: state = {model, gpu (names), weight, kv, compute
   * ("auto" or a dtype), n, batch, prompt, output, mbu, mfu (strings or numbers)}. Returns the
   * raw numbers (only batch, TPOT and throughput if summary); throws CalcError with the library's message where the library raises. */
  // The compute precision and the chip's peak in it: "auto" follows the weights' format.
  function computeOf(state, chip) {
    if (state.compute === "auto") return chip.auto[state.weight];
    const chipPeak = chip.compute[state.compute];
    if (typeof chipPeak === "string") throw new CalcError(chipPeak);
    return [state.compute, chipPeak];
  }

  function estimate(state, summary) {
    const m = D.models[state.model], chip = D.accelerators[state.gpu];
    if (!m || !chip) throw new CalcError("unknown model or accelerator");
    if (Number(state.dp || 1) > 1) return estimateDp(state, summary, m, chip);
    const n = Number(state.n), chipTp = chip.tp[n], modelTp = m.tp[n];
    if (!chipTp || !modelTp) throw new CalcError("n_gpus must be one of " + D.gpuCounts.join(", "));
    if (chipTp.error) throw new CalcError(chipTp.error);
    const [computeDtype, chipPeak] = computeOf(state, chip);
    const mbu = fraction("mbu", state.mbu), mfu = fraction("mfu", state.mfu);
    if (modelTp.error) throw new CalcError(modelTp.error);
    const b = count("batch", state.batch), p = count("prompt_len", state.prompt),
      o = count("output_len", state.output);
    if (p + o > m.maxContext) {
      throw new CalcError(m.contextError.replace("{}", (p + o).toLocaleString("en-US")));
    }
    const sizes = {weight: D.sizes.weight[state.weight], head: D.sizes.head[state.weight],
      kv: (m.kvSizes || D.sizes.kv)[state.kv]};
    const [headDtype, headPeak] = chip.head[state.weight], [attentionDtype, attentionPeak] =
      chip.attention, bw = chip.bandwidth * mbu;
    // Setup.math_dtype and peak_of, per kernel: element-wise work has no tensor-core peak
    const kernelMath = new Map(m.kernels.map((k, i) => [k, m.math[i]]));
    const dtypes = {body: computeDtype, head: headDtype, attention: attentionDtype};
    const peaks = {body: chipPeak * mfu, head: headPeak * mfu, attention: attentionPeak * mfu};
    const mathOf = (k) => kernelMath.get(k) === null ? null : dtypes[kernelMath.get(k)];
    const peakOf = (k) => kernelMath.get(k) === null ? Infinity : peaks[kernelMath.get(k)];
    const passes = D.passes[state.model], prefillFn = passes.prefill,
      decodeFn = passes.decode || passes.prefill;
    // Setup.allreduce_s: 2L + 1 all-reduces of the hidden state, one all-gather of the logits
    const hidden = (tokens) => tokens * m.hidden * D.sizes.act,
      logits = (tokens) => tokens * m.vocab * D.sizes.act, nColl = 2 * m.nLayers + 1;
    const allreduce = (tokens, logitsTokens) => n === 1 ? 0 :
      nColl * (chipTp.allreduce[0] * hidden(tokens) + chipTp.allreduce[1])
      + chipTp.allgather[0] * logits(logitsTokens) + chipTp.allgather[1];
    // Setup.allreduce_floor: the same collectives at their least cost, [link, network, latency]
    const collectives = (tokens, logitsTokens) => n === 1 ? [0, 0, 0] : [0, 1, 2].map((i) =>
      nColl * chipTp.allreduceFloor[i] * (i < 2 ? hidden(tokens) : 1)
      + chipTp.allgatherFloor[i] * (i < 2 ? logits(logitsTokens) : 1));

    const steps = Math.max(o - 1, 1), decodeColl = collectives(b, b);
    const flat = Math.max(decodeColl[0], decodeColl[1], b === 1 ? 0 : decodeColl[2]);
    const [means, envelope] = decodeMeans(m, modelTp, sizes, decodeFn, b, p, steps, peakOf, bw, flat);
    const decodeAr = allreduce(b, b);
    let tpot = 0, flops = 0, moved = 0, decodeMath = 0;
    for (const [k, [f, mv, t]] of means) { tpot += t; flops += f; moved += mv; decodeMath += f / peakOf(k); }
    tpot += decodeAr;
    const decodeBusy = busy(decodeMath, moved / bw, decodeColl, b === 1, tpot,
      envelope + (b === 1 ? decodeColl[2] : 0));
    if (summary) {  // for the chart
      return {batch: b, tpot_s: tpot, throughput_tok_s: b / tpot, tpot_floor_s: decodeBusy.floor,
        throughput_floor_tok_s: b / decodeBusy.floor};
    }

    const mem = memory(m, modelTp, n, chip, sizes, b, p, o);
    // calculator._prefill: in chunks, each pass's kernels on their rooflines and its own
    // collectives, summed over the passes; logits at each prompt's last position only
    const prefill = new Map(), prefillTimes = new Map(), prefillColl = [0, 0, 0];
    let prefillAr = 0, prefillArBytes = 0, single = true;
    for (const g of prefillPasses(b, p, D.defaults.prefill_chunk)) {
      const pass = kernels(m, modelTp, sizes, prefillFn, g.batch, g.nNew, g.nPast, g.logits);
      if (g.logits === 0) {  // no logits: the LM head and the sampler are skipped
        pass.set("lm_head", [0, 0]);
        pass.set("sampling", [0, 0]);
      }
      for (const [k, [f, mv]] of pass) {
        const acc = prefill.get(k) || [0, 0];
        prefill.set(k, [acc[0] + g.count * f, acc[1] + g.count * mv]);
        prefillTimes.set(k, (prefillTimes.get(k) || 0)
          + g.count * Math.max(f / peakOf(k), mv / bw));
      }
      const tokens = g.batch * g.nNew;
      prefillAr += g.count * allreduce(tokens, g.logits);
      collectives(tokens, g.logits).forEach((x, i) => { prefillColl[i] += g.count * x; });
      prefillArBytes += g.count * (modelTp.allreduceBytesPerToken * tokens
        + modelTp.gatherBytesPerToken * g.logits);
      single = single && g.batch === 1;
    }
    let ttft = 0, prefillMath = 0, prefillBytes = 0;
    for (const t of prefillTimes.values()) ttft += t;
    for (const [k, [f, mv]] of prefill) { prefillMath += f / peakOf(k); prefillBytes += mv; }
    ttft += prefillAr;
    const prefillBusy = busy(prefillMath, prefillBytes / bw, prefillColl, single, ttft);
    const queue = D.defaults.queue_s;
    ttft += queue;

    const decode = new Map([...means].map(([k, [f, mv]]) => [k, [f, mv]]));
    const decodeTimes = new Map([...means].map(([k, v]) => [k, v[2]]));
    const ttftFloor = prefillBusy.floor + queue, tpotFloor = decodeBusy.floor;
    return {
      model: state.model, accelerator: chip.name, batch: b, prompt_len: p, output_len: o,
      weight_dtype: state.weight, kv_dtype: state.kv, compute_dtype: computeDtype,
      head_dtype: headDtype, attention_dtype: attentionDtype, n_gpus: n,
      nodes: chipTp.nodes, mbu, mfu, memory: mem, fits: mem.free >= 0, ttft_s: ttft,
      prefill_bound: bound(prefill, prefillTimes, peakOf, bw), tpot_s: tpot,
      decode_bound: bound(decode, decodeTimes, peakOf, bw), throughput_tok_s: b / tpot,
      decode_bytes: moved, decode_flops: flops, allreduce_s: decodeAr,
      bandwidth_utilisation: moved / tpot / chip.bandwidth,
      e2e_s: ttft + (o - 1) * tpot,
      ttft_floor_s: ttftFloor, tpot_floor_s: tpotFloor, throughput_floor_tok_s: b / tpotFloor,
      e2e_floor_s: ttftFloor + (o - 1) * tpotFloor,
      resources: {prefill: prefillBusy, decode: decodeBusy},
      breakdown: {
        prefill: phaseRows(prefill, prefillTimes, mathOf, peakOf, bw, prefillAr + queue,
          prefillArBytes, n),
        decode: phaseRows(decode, decodeTimes, mathOf, peakOf, bw, decodeAr,
          (modelTp.allreduceBytesPerToken + modelTp.gatherBytesPerToken) * b, n),
      },
    };
  }

  /* parallel._miss: the chance none of a token's k experts (uniform, without replacement among
   * e) is one of `held` given ones, C(e - held, k) / C(e, k). */
  function miss(e, k, held) {
    let out = 1;
    for (let i = 0; i < k; i++) out *= Math.max(e - held - i, 0) / (e - i);
    return out;
  }

  /* parallel._remote_copies: copies of a token's hidden state one MoE layer sends, as
   * [[link, network] at the least, [link, network] one per (token, expert) pair]. */
  function remoteCopies(e, k, ep, domain) {
    if (ep === 1) return [[0, 0], [0, 0]];
    const d = Math.min(ep, domain), nodes = Math.ceil(ep / d), per = e / ep;
    return [[(d - 1) * (1 - miss(e, k, per)), (nodes - 1) * (1 - miss(e, k, per * d))],
      [k * (d - 1) / ep, k * (ep - d) / ep]];
  }

  /* parallel.dp_ep_estimate (balanced experts, no MTP, uniform routing, FP8 dispatch and BF16
   * combine): Layout(dp, ep), each of dp GPUs with the whole attention and its own
   * ceil(batch / dp) sequences, the routed experts spread over ep (1 or dp) GPUs. On the
   * busiest GPU: one pass's kernels at n_gpus = 1, each routed-expert kernel reading the
   * experts its share of all dp GPUs' tokens touch (_dp_pass), then per MoE layer an
   * all-to-all dispatch and combine, at the floor one copy per distinct remote GPU, kernel by
   * kernel one per pair, after the kernels (_dp_times). The prefill is one pass of the GPU's
   * prompts; memory is one GPU's less the routed experts held elsewhere. */
  function estimateDp(state, summary, m, chip) {
    const dp = Number(state.dp), ep = Number(state.ep || 1), info = m.dp;
    if (!D.dpCounts.includes(dp) || !D.dpCounts.includes(ep)) {
      throw new CalcError("dp and ep must be one of " + D.dpCounts.join(", "));
    }
    if (ep !== 1 && ep !== dp) {
      throw new CalcError(D.messages.layoutEp.replace("{dp}", dp).replace("{ep}", ep));
    }
    const [computeDtype, chipPeak] = computeOf(state, chip);
    const mbu = fraction("mbu", state.mbu), mfu = fraction("mfu", state.mfu);
    const links = ep > 1 ? chip.ep[ep] : null;
    if (ep > 1 && info.epErrors[ep]) throw new CalcError(info.epErrors[ep]);
    if (typeof links === "string") throw new CalcError(links);
    const bAll = count("batch", state.batch), b = Math.ceil(bAll / dp),
      p = count("prompt_len", state.prompt), o = count("output_len", state.output);
    if (p + o > m.maxContext) {
      throw new CalcError(m.contextError.replace("{}", (p + o).toLocaleString("en-US")));
    }
    const tp = m.tp[1], sizes = {weight: D.sizes.weight[state.weight],
      head: D.sizes.head[state.weight], kv: (m.kvSizes || D.sizes.kv)[state.kv]};
    const [headDtype, headPeak] = chip.head[state.weight], [attentionDtype, attentionPeak] =
      chip.attention, bw = chip.bandwidth * mbu;
    const kernelMath = new Map(m.kernels.map((k, i) => [k, m.math[i]]));
    const dtypes = {body: computeDtype, head: headDtype, attention: attentionDtype};
    const peaks = {body: chipPeak * mfu, head: headPeak * mfu, attention: attentionPeak * mfu};
    const mathOf = (k) => kernelMath.get(k) === null ? null : dtypes[kernelMath.get(k)];
    const peakOf = (k) => kernelMath.get(k) === null ? Infinity : peaks[kernelMath.get(k)];
    const passes = D.passes[state.model], prefillFn = passes.prefill,
      decodeFn = passes.decode || passes.prefill;
    const moe = info.moe && ep > 1;
    // _dp_pass: a GPU of the EP group reads the experts that all dp GPUs' tokens touch, E/ep of
    // them, where alone its own tokens would touch E (1 - (1 - k/E)^t)
    const adjust = (tokens) => (ks) => {
      if (!moe) return ks;
      const e = info.experts, q = 1 - info.k / e, held = (e / ep) * (1 - q ** (tokens * dp)),
        local = e * (1 - q ** tokens), extra = info.moeLayers * (held - local) * info.matrix
          * sizes.weight;
      for (const op of ["gate_proj", "up_proj", "down_proj"]) {
        const [f, mv] = ks.get(op);
        ks.set(op, [f, mv + extra]);
      }
      return ks;
    };
    // the all-to-alls of a pass of `tokens` tokens: [link, network, latency] at the floor, and
    // the kernel-by-kernel time (one copy per pair, one after another, with their latencies)
    const [least, pairs] = moe ? remoteCopies(info.experts, info.k, ep, chip.domain)
      : [[0, 0], [0, 0]];
    const allToAll = (tokens) => {
      if (!moe) return {floor: [0, 0, 0], kbk: 0, bytes: [0, 0]};
      const [oneWay, net, latency] = links,
        perCopy = info.moeLayers * tokens * (info.dispatch + info.combine);
      const linkS = perCopy * least[0] / oneWay, netS = net ? perCopy * least[1] / net : 0;
      const kbk = perCopy * pairs[0] / oneWay + (net ? perCopy * pairs[1] / net : 0)
        + 2 * info.moeLayers * latency;
      return {floor: [linkS, netS, 2 * info.moeLayers * latency], kbk,
        least: perCopy * (least[0] + least[1]), pairs: perCopy * (pairs[0] + pairs[1])};
    };
    const single = b === 1;

    // decode: the exact mean over the output_len - 1 steps, as the TP path's
    const steps = Math.max(o - 1, 1), decodeA2a = allToAll(b), decodeColl = decodeA2a.floor;
    const flat = Math.max(decodeColl[0], decodeColl[1], single ? 0 : decodeColl[2]);
    const [means, envelope] = decodeMeans(m, tp, sizes, decodeFn, b, p, steps, peakOf, bw, flat,
      adjust(b));
    let tpot = 0, flops = 0, moved = 0, decodeMath = 0;
    for (const [k, [f, mv, t]] of means) { tpot += t; flops += f; moved += mv; decodeMath += f / peakOf(k); }
    tpot += decodeA2a.kbk;
    const decodeBusy = busy(decodeMath, moved / bw, decodeColl, single, tpot,
      envelope + (single ? decodeColl[2] : 0));
    if (summary) {
      return {batch: bAll, tpot_s: tpot, throughput_tok_s: bAll / tpot,
        tpot_floor_s: decodeBusy.floor, throughput_floor_tok_s: bAll / decodeBusy.floor};
    }

    // the prefill: each GPU's b prompts in one pass, logits at each prompt's last position
    const prefill = adjust(b * p)(kernels(m, tp, sizes, prefillFn, b, p, 0, b)),
      prefillTimes = new Map(), prefillA2a = allToAll(b * p);
    let ttft = 0, prefillMath = 0, prefillBytes = 0;
    for (const [k, [f, mv]] of prefill) {
      const t = Math.max(f / peakOf(k), mv / bw);
      prefillTimes.set(k, t);
      ttft += t; prefillMath += f / peakOf(k); prefillBytes += mv;
    }
    ttft += prefillA2a.kbk;
    const prefillBusy = busy(prefillMath, prefillBytes / bw, prefillA2a.floor, single, ttft);

    const mem = memoryDp(m, chip, sizes, b, p, o, ep);
    const decode = new Map([...means].map(([k, [f, mv]]) => [k, [f, mv]]));
    const decodeTimes = new Map([...means].map(([k, v]) => [k, v[2]]));
    const rows = (costs, times, a2a) => {
      const r = phaseRows(costs, times, mathOf, peakOf, bw, a2a.kbk, 0, 1);
      if (moe) {
        let total = 0;
        for (const t of times.values()) total += t;
        r.push({op: "all_to_all", flops: 0, bytes: a2a.pairs, intensity: null, time_s: a2a.kbk,
          bound: links[1] ? "network" : "interconnect", share: a2a.kbk / (total + a2a.kbk)});
      }
      return r;
    };
    const ttftFloor = prefillBusy.floor, tpotFloor = decodeBusy.floor;
    return {
      model: state.model, accelerator: chip.name, batch: bAll, batch_per_gpu: b, prompt_len: p,
      output_len: o, weight_dtype: state.weight, kv_dtype: state.kv, compute_dtype: computeDtype,
      head_dtype: headDtype, attention_dtype: attentionDtype, n_gpus: dp, dp, ep,
      nodes: Math.ceil(dp / chip.domain), mbu, mfu, memory: mem, fits: mem.free >= 0,
      ttft_s: ttft, prefill_bound: bound(prefill, prefillTimes, peakOf, bw), tpot_s: tpot,
      decode_bound: bound(decode, decodeTimes, peakOf, bw), throughput_tok_s: bAll / tpot,
      decode_bytes: moved, decode_flops: flops, all_to_all_s: decodeA2a.kbk,
      all_to_all_bytes: moe ? decodeA2a.least : 0,
      bandwidth_utilisation: moved / tpot / chip.bandwidth, e2e_s: ttft + (o - 1) * tpot,
      ttft_floor_s: ttftFloor, tpot_floor_s: tpotFloor, throughput_floor_tok_s: bAll / tpotFloor,
      e2e_floor_s: ttftFloor + (o - 1) * tpotFloor,
      resources: {prefill: prefillBusy, decode: decodeBusy},
      breakdown: {prefill: rows(prefill, prefillTimes, prefillA2a),
        decode: rows(decode, decodeTimes, decodeA2a)},
    };
  }

  /* dp_ep_estimate's memory: one GPU's (n_gpus = 1) for its own sequences, less the routed
   * experts held by the other GPUs of the EP group, (1 - 1/ep) of them. */
  function memoryDp(m, chip, sizes, b, p, o, ep) {
    const mem = memory(m, m.tp[1], 1, chip, sizes, b, p, o);
    if (!m.dp.moe || ep === 1) return mem;
    const weights = mem.weights - m.dp.routedParams * (1 - 1 / ep) * sizes.weight,
      used = weights + mem.kv_cache + mem.activations;
    return {...mem, weights, used, free: mem.usable - used};
  }

  function memory(m, tp, n, chip, sizes, b, p, o) {  // calculator._memory
    let weights = 0;
    m.params.forEach((x, i) => { weights += x * tp.shares[i] * (m.head[i] ? sizes.head : sizes.weight); });
    const kvCache = b * D.passes[m.name].kvCache(p + o) * tp.kvShare * sizes.kv;
    const tokens = prefillPassTokens(b, p, D.defaults.prefill_chunk);  // the largest pass
    const activations = tokens * tp.actPerToken * D.sizes.act
      + b * m.vocab / n * 4;  // the last position's fp32 logits
    const capacity = chip.memoryBytes, reserve = D.defaults.reserve_fraction * capacity;
    const used = weights + kvCache + activations;
    return {weights, kv_cache: kvCache, activations, reserve, capacity, used,
      usable: capacity - reserve, free: (capacity - reserve) - used};
  }

  /* calculator.max_batch: the largest batch that fits, by bisection; with data-parallel
   * attention dp times the most sequences one GPU holds (the busiest holds ceil(batch / dp)). */
  function maxBatch(state) {
    const dp = Number(state.dp || 1);
    const probe = (b) => estimateMemory({...state, batch: b}).free >= 0;
    let lo = 0, hi = 2 ** 40;
    if (probe(hi)) return dp * hi;
    while (hi - lo > 1) { const mid = Math.floor((lo + hi) / 2); if (probe(mid)) lo = mid; else hi = mid; }
    return dp * lo;
  }

  function estimateMemory(state) {
    const m = D.models[state.model], chip = D.accelerators[state.gpu], n = Number(state.n);
    const sizes = {weight: D.sizes.weight[state.weight], head: D.sizes.head[state.weight],
      kv: (m.kvSizes || D.sizes.kv)[state.kv]};
    if (Number(state.dp || 1) > 1) {  // state.batch: the sequences of one GPU
      return memoryDp(m, chip, sizes, Number(state.batch), Number(state.prompt),
        Number(state.output), Number(state.ep || 1));
    }
    return memory(m, m.tp[n], n, chip, sizes, Number(state.batch), Number(state.prompt),
      Number(state.output));
  }

  const api = {estimate, maxBatch, meanOfMax, meanOfEnvelope, prefillPasses, CalcError, data: D};
  if (typeof module !== "undefined" && module.exports) { module.exports = api; return; }
  root.llmCalc = api;

  // ---------------------------------------------------------------- the page
  const container = root.document && root.document.getElementById("llm-calc");
  if (!container) return;
  const doc = root.document;
  const slug = (name) => name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
  const chipBySlug = Object.fromEntries(Object.keys(D.accelerators).map((c) => [slug(c), c]));

  // number formats; tests/test_calculator_page.py reads them back to their printed digits
  const sig = (x) => x === 0 ? "0" : Math.abs(x) >= 1000 ? Math.round(x).toLocaleString("en-US")
    : x.toPrecision(4);
  const time = (s) => s >= 1 ? sig(s) + " s" : s >= 1e-3 ? sig(s * 1e3) + " ms"
    : s >= 1e-6 || s === 0 ? sig(s * 1e6) + " µs" : sig(s * 1e9) + " ns";
  const gib = (x) => (x / 2 ** 30).toFixed(2) + " GiB";
  const pct = (x) => (100 * x).toFixed(1) + " %";

  const FIELDS = [  // [key, URL key, label, kind, options or attributes, default]
    ["model", "model", "Model", "select", Object.keys(D.models), "llama-3-70b"],
    ["gpu", "gpu", "Accelerator", "select", Object.keys(D.accelerators), "NVIDIA H100 SXM"],
    ["n", "n", "GPUs (tensor-parallel)", "select", D.gpuCounts.map(String), "2"],
    ["dp", "dp", "Data-parallel attention (GPUs)", "select", D.dpCounts.map(String), "1"],
    ["ep", "ep", "Experts spread over (EP)", "select", D.dpCounts.map(String), "1"],
    ["weight", "w", "Weights", "select", D.dtypes, "fp8_e4m3"],
    ["kv", "kv", "KV cache", "select", D.dtypes, "bf16"],
    ["compute", "c", "Tensor math", "select", ["auto", ...D.dtypes], "auto"],
    ["batch", "b", "Batch (users)", "number", {min: 1, step: 1}, "32"],
    ["prompt", "p", "Prompt tokens", "number", {min: 1, step: 1}, "2048"],
    ["output", "o", "Output tokens", "number", {min: 1, step: 1}, "256"],
    ["mbu", "mbu", "MBU (share of peak bytes/s)", "number", {min: 0.001, max: 1, step: 0.01}, "1"],
    ["mfu", "mfu", "MFU (share of peak FLOP/s)", "number", {min: 0.001, max: 1, step: 0.01}, "1"],
  ];
  const GROUPS = [["Model and hardware", ["model", "gpu"]], ["Parallel layout", ["n", "dp", "ep"]],
    ["Precision", ["weight", "kv", "compute"]], ["Workload", ["batch", "prompt", "output"]],
    ["Efficiency", ["mbu", "mfu"]]];

  function el(tag, attrs, ...children) {
    const e = doc.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  }

  const inputs = {};
  const form = el("form", {class: "lc-controls", "aria-label": "Calculator settings"});
  form.addEventListener("submit", (ev) => ev.preventDefault());
  for (const [legend, keys] of GROUPS) {
    const fs = el("fieldset", {}, el("legend", {}, legend));
    for (const key of keys) {
      const [, , label, kind, opts] = FIELDS.find((f) => f[0] === key);
      const id = "lc-" + key;
      let input;
      if (kind === "select") {
        input = el("select", {id, name: key});
        for (const o of opts) {
          const text = key === "compute" && o === "auto" ? "auto (weights)"
            : key === "dp" && o === "1" ? "off (tensor-parallel)" : o;
          input.append(el("option", {value: o}, text));
        }
      } else {
        input = el("input", {id, name: key, type: "number", inputmode: "decimal", ...opts});
      }
      inputs[key] = input;
      fs.append(el("div", {class: "lc-field"}, el("label", {for: id}, label), input));
    }
    form.append(fs);
  }
  // what the chosen layout is, in a sentence under its fieldset
  const layoutNote = el("p", {class: "lc-note lc-layout-note"});
  inputs.ep.closest("fieldset").append(layoutNote);

  const out = (key, cls) => el("output", {"data-key": key, class: cls || ""});
  const error = el("p", {class: "lc-error", role: "alert", hidden: ""});
  // a time: kernel by kernel (big) and its floor beside it (module docs of calculator.py)
  const card = (title, key, note, floorKey, floorLabel) => el("div", {class: "lc-card"},
    el("span", {class: "lc-card-title"}, title), out(key, "lc-big"),
    ...(floorKey ? [el("span", {class: "lc-kind"}, "kernel by kernel"),
      el("span", {class: "lc-floor"}, floorLabel || "floor", " ", out(floorKey))] : []),
    el("span", {class: "lc-note"}, note));
  const cards = el("div", {class: "lc-cards", "aria-live": "polite"},
    card("TTFT", "ttft_s", "prefill of the whole batch; floor set by ", "ttft_floor_s"),
    card("TPOT", "tpot_s", "each user, mean decode step; floor set by ", "tpot_floor_s"),
    card("Throughput", "throughput_tok_s", "tokens/s, all users", "throughput_floor_tok_s",
      "at the floor"),
    card("Decode is", "decode_bound", ""),
    card("One request", "e2e_s", "TTFT + (output − 1) × TPOT", "e2e_floor_s"));
  const notes = cards.querySelectorAll(".lc-note");
  notes[0].append(out("resources.prefill.limit"));
  notes[1].append(out("resources.decode.limit"));
  notes[3].append(out("bandwidth_utilisation"), " of peak bandwidth");

  const memRows = [["weights", "Weights"], ["kv_cache", "KV cache"], ["activations", "Activations"],
    ["reserve", "Runtime reserve"], ["free", "Free"], ["capacity", "Capacity"]];
  const memTable = el("table", {class: "lc-mem"}, el("caption", {}, "GiB = 2³⁰ bytes"));
  for (const [key, label] of memRows) {
    memTable.append(el("tr", {}, el("th", {scope: "row"},
      el("span", {class: "lc-swatch lc-" + key}), label), el("td", {}, out("memory." + key))));
  }
  const bar = el("div", {class: "lc-bar", role: "img"});
  const verdict = el("p", {class: "lc-verdict"}, out("fits"));
  const memBox = el("div", {class: "lc-memory"}, verdict, bar, memTable);

  const chartBox = el("div", {class: "lc-charts"});
  const phase = el("select", {id: "lc-phase"}, el("option", {value: "decode"}, "one decode step (mean)"),
    el("option", {value: "prefill"}, "the prefill (whole batch)"));
  const table = el("table", {class: "lc-breakdown"});
  const tableWrap = el("div", {class: "lc-table-wrap", tabindex: "0", role: "region",
    "aria-label": "Per-kernel breakdown"}, table);
  const link = el("a", {class: "lc-link", href: "#"}, "Link to these settings");
  const precision = el("p", {class: "lc-precision"});
  const legend = el("p", {class: "lc-precision"}, "Kernel by kernel: each kernel on its own " +
    "roofline, one after another, what a plain engine pays. Floor: the busiest resource's time " +
    "(math, memory, link or network), which no engine beats however it overlaps its kernels.");
  const results = el("div", {class: "lc-results"},
    cards, legend, precision, el("h3", {}, "Memory per GPU"), memBox, el("h3", {}, "Against the batch"),
    chartBox, el("p", {class: "lc-chart-note"}, "Kernel by kernel, solid: the batches that fit in " +
      "memory; dashed and shaded: beyond the memory limit; the dot: this batch. Thin: the floor."), el("h3", {}, "Per kernel"),
    el("div", {class: "lc-field lc-inline"}, el("label", {for: "lc-phase"}, "Phase"), phase),
    tableWrap);
  container.replaceChildren(form, el("p", {}, link), error, results);

  function readState() {
    return Object.fromEntries(Object.keys(inputs).map((k) => [k, inputs[k].value]));
  }

  function restore() {
    const q = new URLSearchParams(root.location.hash.replace(/^#/, ""));
    for (const [key, urlKey, , kind, opts, dflt] of FIELDS) {
      let v = q.has(urlKey) ? q.get(urlKey) : dflt;
      if (key === "gpu") v = chipBySlug[v] || v;
      if (kind === "select" && !opts.includes(v)) v = dflt;
      inputs[key].value = v;
    }
  }

  function hash(state) {
    const q = new URLSearchParams();
    for (const [key, urlKey] of FIELDS) q.set(urlKey, key === "gpu" ? slug(state.gpu) : state[key]);
    return "#" + q.toString();
  }

  let last = null;
  function describeLayout(state) {  // the layout in one sentence; which controls apply
    const dp = Number(state.dp), ep = Number(state.ep), m = D.models[state.model];
    inputs.n.disabled = dp > 1;
    inputs.ep.disabled = dp === 1;
    if (dp === 1) {
      layoutNote.textContent = "Tensor parallelism: every layer split over the GPUs, two " +
        "all-reduces a layer." + (m.dp.moe ? " For this mixture of experts, try data-parallel " +
        "attention with its experts spread (DP = EP = 8)." : "");
    } else if (!m.dp.moe) {
      layoutNote.textContent = `${dp} GPUs, each a whole copy of this dense model serving its ` +
        "own users: plain data parallelism, with EP 1 (it has no experts to spread). The GPUs " +
        "field is not used.";
    } else if (ep === 1) {
      layoutNote.textContent = `${dp} GPUs, each a whole copy of the model serving its own ` +
        "users: plain data parallelism, no collectives. The GPUs field is not used.";
    } else {
      layoutNote.textContent = `${dp} GPUs, each running the attention of its own users; the ` +
        `routed experts spread over ${ep} of them, reached by an all-to-all (FP8 out, BF16 ` +
        "back) in every MoE layer. The GPUs field is not used.";
    }
  }

  function update() {
    const t0 = root.performance.now();
    const state = readState();
    describeLayout(state);
    try {
      last = estimate(state);
      last.max_batch = maxBatch(state);
      show(last, state);
      error.hidden = true;
      results.hidden = false;
    } catch (err) {
      if (!(err instanceof CalcError)) throw err;
      last = {error: err.message};
      error.textContent = err.message;
      error.hidden = false;
      results.hidden = true;
    }
    const h = hash(state);
    link.href = h;
    try { root.history.replaceState(null, "", h); } catch (e) { /* file:// in some browsers */ }
    api.lastUpdateMs = root.performance.now() - t0;
  }

  function put(key, text) { container.querySelector(`[data-key="${key}"]`).textContent = text; }

  function show(e, state) {
    for (const key of ["ttft_s", "tpot_s", "e2e_s", "ttft_floor_s", "tpot_floor_s", "e2e_floor_s"]) {
      put(key, time(e[key]));
    }
    put("throughput_tok_s", sig(e.throughput_tok_s));
    put("throughput_floor_tok_s", sig(e.throughput_floor_tok_s));
    for (const ph of ["prefill", "decode"]) put(`resources.${ph}.limit`, e.resources[ph].limit);
    put("decode_bound", e.decode_bound + "-bound");
    put("bandwidth_utilisation", pct(e.bandwidth_utilisation));
    precision.textContent = `Math: the weight matmuls at the ${e.compute_dtype} peak, the LM ` +
      `head at ${e.head_dtype}, the attention at ${e.attention_dtype}; element-wise work priced ` +
      `by its bytes; ${e.n_gpus} GPU${e.n_gpus > 1 ? "s" : ""} in ${e.nodes} ` +
      `node${e.nodes > 1 ? "s" : ""}` + (e.dp ? `, ${e.batch_per_gpu.toLocaleString("en-US")} ` +
        `user${e.batch_per_gpu > 1 ? "s" : ""} on the busiest GPU (memory and times are that ` +
        "GPU's; the prefill is its prompts in one pass)" : "") +
      `; kernel by kernel, the prefill is ${e.prefill_bound}-bound.`;
    const mem = e.memory;
    for (const [key] of memRows) put("memory." + key, gib(mem[key]));
    const users = e.max_batch === 1 ? "1 user fits" : `up to ${e.max_batch.toLocaleString("en-US")} users fit`;
    put("fits", e.fits ? `Fits: ${users} with these lengths.`
      : `Does not fit: ${gib(mem.used + mem.reserve)} needed of ${gib(mem.capacity)}; ` +
        (e.max_batch ? users + "." : "not even one user fits."));
    verdict.className = "lc-verdict " + (e.fits ? "lc-ok" : "lc-bad");
    const total = Math.max(mem.capacity, mem.used + mem.reserve);
    bar.replaceChildren(...["weights", "kv_cache", "activations", "reserve"].map((k) =>
      el("span", {class: "lc-" + k, style: `width:${(100 * mem[k] / total).toFixed(3)}%`})));
    if (!e.fits) bar.append(el("span", {class: "lc-over",
      style: `left:${(100 * mem.capacity / total).toFixed(3)}%`}));
    bar.setAttribute("aria-label", `Memory per GPU: ${gib(mem.used + mem.reserve)} of ${gib(mem.capacity)}`);
    charts(e, state);
    breakdown(e);
  }

  function breakdown(e) {
    const rows = e.breakdown[phase.value];
    const head = el("tr", {}, ...["kernel", "GFLOP", "MB", "FLOP/B", "time", "math", "bound",
      "share"].map((h) => el("th", {scope: "col"}, h)));
    const body = rows.map((r) => el("tr", {}, el("th", {scope: "row"}, r.op),
      el("td", {}, sig(r.flops / 1e9)), el("td", {}, sig(r.bytes / 1e6)),
      el("td", {}, r.intensity === null ? "–" : sig(r.intensity)), el("td", {}, time(r.time_s)),
      el("td", {}, r.math || "–"), el("td", {class: "lc-b-" + r.bound}, r.bound),
      el("td", {}, pct(r.share))));
    table.replaceChildren(el("caption", {}, "Per kernel, per GPU, kernel by kernel: " +
      phase.selectedOptions[0].text),
      el("thead", {}, head), el("tbody", {}, ...body));
  }

  // ---- the chart: TPOT and throughput against the batch, the memory limit marked (SVG)
  const NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const e = doc.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const niceMax = (y) => {
    const p = 10 ** Math.floor(Math.log10(y)), r = y / p;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * p;
  };
  const short = (x) => x >= 1e6 ? x / 1e6 + "M" : x >= 1e3 ? x / 1e3 + "k" : String(x);

  function charts(e, state) {
    const limit = e.max_batch, top = Math.max(64, 2 * e.batch, 2 * Math.max(limit, 1));
    const xmax = 2 ** Math.min(24, Math.ceil(Math.log2(top)));
    const points = [];
    for (let k = 0; 2 ** (k / 2) <= xmax; k++) {
      const b = Math.round(2 ** (k / 2));
      if (points.length && points[points.length - 1].b === b) continue;
      const r = estimate({...state, batch: b}, true);
      points.push({b, tpot: r.tpot_s, thr: r.throughput_tok_s, tpotFloor: r.tpot_floor_s,
        thrFloor: r.throughput_floor_tok_s});
    }
    const tpotMax = Math.max(...points.map((q) => q.tpot));
    const unit = tpotMax >= 1 ? [1, "s"] : tpotMax >= 1e-3 ? [1e3, "ms"] : [1e6, "µs"];
    chartBox.replaceChildren(
      chart(points, (q) => q.tpot * unit[0], `TPOT (${unit[1]})`, limit, e.batch, e.tpot_s * unit[0],
        (q) => q.tpotFloor * unit[0]),
      chart(points, (q) => q.thr, "throughput (tokens/s)", limit, e.batch, e.throughput_tok_s,
        (q) => q.thrFloor));
  }

  function chart(points, y, title, limit, batch, current, floor) {
    const W = 360, H = 220, L = 52, R = 12, T = 14, B = 40;
    const xmax = points[points.length - 1].b,
      ymax = niceMax(Math.max(...points.map(y), ...points.map(floor)) || 1);
    const X = (b) => L + (W - L - R) * Math.log2(b) / Math.log2(xmax);
    const Y = (v) => T + (H - T - B) * (1 - v / ymax);
    const s = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "lc-chart", role: "img",
      "aria-label": `${title} against the batch, 1 to ${short(xmax)}; ` +
        (limit ? `memory fits up to a batch of ${limit.toLocaleString("en-US")}` : "nothing fits in memory")});
    if (limit < xmax) {
      const x0 = X(Math.max(limit, 1));
      s.append(svg("rect", {x: x0, y: T, width: W - R - x0, height: H - T - B, class: "lc-nofit"}));
      s.append(svg("line", {x1: x0, x2: x0, y1: T, y2: H - B, class: "lc-limit"}));
      const left = x0 > W - 110;  // the label on the side of the line with room for it
      s.append(svg("text", {x: left ? x0 - 4 : x0 + 4, y: T + 12, class: "lc-limit-label",
        "text-anchor": left ? "end" : "start"},
      limit ? `memory limit ${limit.toLocaleString("en-US")}` : "nothing fits"));
    }
    for (let i = 0; i <= 4; i++) {
      const v = ymax * i / 4;
      s.append(svg("line", {x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: "lc-grid"}));
      s.append(svg("text", {x: L - 4, y: Y(v) + 4, "text-anchor": "end", class: "lc-tick"},
        v >= 1000 ? short(Math.round(v)) : String(+v.toPrecision(3))));
    }
    const step = Math.max(1, Math.ceil(Math.log2(xmax) / 6));
    for (let k = 0; 2 ** k <= xmax; k += step) {
      s.append(svg("text", {x: X(2 ** k), y: H - B + 14, "text-anchor": "middle", class: "lc-tick"},
        short(2 ** k)));
    }
    s.append(svg("text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "lc-axis"},
      "batch (users, log scale)"));
    s.append(svg("text", {x: L, y: 10, class: "lc-axis"}, title));
    const path = (pts) => pts.map((q, i) => `${i ? "L" : "M"}${X(q.b).toFixed(1)},${Y(y(q)).toFixed(1)}`).join("");
    s.append(svg("path", {d: points.map((q, i) => `${i ? "L" : "M"}${X(q.b).toFixed(1)},` +
      `${Y(floor(q)).toFixed(1)}`).join(""), class: "lc-line lc-floor-line"}));
    s.append(svg("path", {d: path(points), class: "lc-line lc-dashed"}));
    const fit = points.filter((q) => q.b <= limit);
    if (fit.length > 1) s.append(svg("path", {d: path(fit), class: "lc-line"}));
    if (batch <= xmax) s.append(svg("circle", {cx: X(batch), cy: Y(current), r: 4, class: "lc-dot"}));
    return s;
  }

  for (const input of Object.values(inputs)) input.addEventListener("input", update);
  phase.addEventListener("change", () => { if (!last.error) breakdown(last); });
  root.addEventListener("hashchange", () => { if (root.location.hash !== link.getAttribute("href")) { restore(); update(); } });
  api.values = () => last;
  api.state = readState;
  api.update = update;
  restore();
  update();
})(globalThis);
