(function () {
'use strict';
var root = document.getElementById('report');
var SVGNS = 'http://www.w3.org/2000/svg';
var COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

function el(tag, attrs, parent, text) {
  var e = document.createElement(tag);
  for (var k in (attrs || {})) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function sv(tag, attrs, parent, text) {
  var e = document.createElementNS(SVGNS, tag);
  for (var k in (attrs || {})) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function us(s) { return (s * 1e6).toFixed(3); }
function num(x) { return String(x); }
function color(i) { return COLORS[i % COLORS.length]; }

// Round tick values covering [lo, hi].
function ticks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  var raw = (hi - lo) / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
  var step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
  var out = [];
  for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

// A plot area with axes; returns {svg, x(v), y(v)}.
function plot(parent, o) {
  var W = o.width || 900, H = o.height || 260, m = {l: 70, r: 20, t: 10, b: 40};
  var svg = sv('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, 'class': o.cls || 'plot'}, parent);
  var x = function (v) { return m.l + (v - o.x0) / ((o.x1 - o.x0) || 1) * (W - m.l - m.r); };
  var y = function (v) { return H - m.b - (v - o.y0) / ((o.y1 - o.y0) || 1) * (H - m.t - m.b); };
  sv('line', {x1: m.l, y1: H - m.b, x2: W - m.r, y2: H - m.b, stroke: '#444'}, svg);
  sv('line', {x1: m.l, y1: m.t, x2: m.l, y2: H - m.b, stroke: '#444'}, svg);
  if (o.xticks !== false) ticks(o.x0, o.x1, 8).forEach(function (t) {
    sv('line', {x1: x(t), y1: H - m.b, x2: x(t), y2: H - m.b + 4, stroke: '#444'}, svg);
    sv('text', {x: x(t), y: H - m.b + 16, 'text-anchor': 'middle'}, svg, (o.xfmt || num)(t));
  });
  if (o.yticks !== false) ticks(o.y0, o.y1, 5).forEach(function (t) {
    sv('line', {x1: m.l - 4, y1: y(t), x2: W - m.r, y2: y(t), stroke: '#eee'}, svg);
    sv('text', {x: m.l - 6, y: y(t) + 4, 'text-anchor': 'end'}, svg, (o.yfmt || num)(t));
  });
  sv('text', {x: (W + m.l) / 2, y: H - 6, 'text-anchor': 'middle'}, svg, o.xlabel || '');
  sv('text', {x: 14, y: (H - m.b) / 2, transform: 'rotate(-90 14 ' + (H - m.b) / 2 + ')', 'text-anchor': 'middle'}, svg, o.ylabel || '');
  return {svg: svg, x: x, y: y, W: W, H: H, m: m};
}

function legend(parent, items) {
  var d = el('div', {'class': 'legend'}, parent);
  items.forEach(function (it) {
    var s = el('span', {}, d);
    el('i', {style: 'background:' + it.color}, s);
    s.appendChild(document.createTextNode(it.name));
  });
}

function table(parent, cls, head, rows) {
  var t = el('table', {'class': cls}, parent), tr = el('tr', {}, t);
  head.forEach(function (h, i) { el('th', {'class': i ? '' : 'l'}, tr, h); });
  rows.forEach(function (r) {
    var tr = el('tr', {}, t);
    r.forEach(function (c, i) {
      var td = el('td', {'class': i ? '' : 'l'}, tr, c.text !== undefined ? c.text : c);
      if (c.key) td.setAttribute('data-key', c.key);
      for (var a in (c.data || {})) td.setAttribute('data-' + a, c.data[a]);
    });
  });
  return t;
}

function overview(parent, n) {
  var o = n.overview;
  table(parent, 'overview', ['node', 'host', 'events recorded', 'dropped', 'seen by probes', 'accounted', 'span (s)', 'TSC (GHz)'],
        [[o.node, o.host, {text: num(o.events), key: 'events'}, {text: num(o.dropped), key: 'dropped'},
          {text: num(o.seen), key: 'seen'}, o.accounted ? 'yes' : 'NO: recorded + dropped != seen',
          o.span_s.toFixed(6), (o.tsc_hz / 1e9).toFixed(6)]]);
  if (o.clock) el('p', {'class': 'note clock-trust'}, parent, o.clock);
  if (o.error) el('p', {'class': 'warn'}, parent, 'Trace damaged: ' + o.error + ' (everything before it is shown).');
}

function clockAdjustments(parent, n) {
  var c = n.clock || {changes: [], state_at_start: ''};
  el('h3', {}, parent, 'Clock adjustments (' + c.changes.length + ')');
  if (c.state_at_start) el('p', {'class': 'note clock-start'}, parent, 'NTP state at start: ' + c.state_at_start);
  if (!c.changes.length) { el('p', {'class': 'note clock-none'}, parent, 'none'); return; }
  table(parent, 'clock-adjustments', ['at (s)', 'kind', 'what'],
        c.changes.map(function (a) { return [a.at_s.toFixed(6), a.kind, a.text]; }));
}

function drops(parent, n) {
  var d = n.drops.dropped || [], s = n.drops.seen || [], total = d.reduce(function (a, b) { return a + b; }, 0);
  // Nothing dropped: a chart of zero bars says less than one line.
  if (d.length && !total) {
    el('p', {'class': 'no-drops', 'data-events': n.overview.events, 'data-dropped': 0}, parent,
       'No drops: ' + n.overview.events + ' events recorded, 0 dropped (' + n.overview.seen + ' seen by the probes, ' +
       d.length + ' CPUs).');
    return;
  }
  el('h3', {}, parent, 'Drops per CPU (' + total + ' of ' + n.overview.seen + ' events)');
  if (!d.length) { el('p', {'class': 'note'}, parent, 'no counters in this trace'); return; }
  var ymax = Math.max(1, Math.max.apply(null, d));
  var p = plot(parent, {x0: 0, x1: d.length, y0: 0, y1: ymax, height: 180, xlabel: 'CPU', ylabel: 'dropped events',
                        xticks: false, cls: 'drops'});
  var bw = (p.x(1) - p.x(0)) * 0.8;
  d.forEach(function (v, i) {
    var r = sv('rect', {x: p.x(i) + bw * 0.125, y: p.y(v), width: bw, height: p.y(0) - p.y(v),
                        fill: v ? '#d62728' : '#ccc', 'data-cpu': i, 'data-dropped': v}, p.svg);
    sv('title', {}, r, 'CPU ' + i + ': ' + v + ' dropped of ' + (s[i] || 0) + ' seen');
    sv('text', {x: p.x(i + 0.5), y: p.H - p.m.b + 16, 'text-anchor': 'middle'}, p.svg, String(i));
  });
}

// A node's own seconds on axis `ax`: the reference's for a translated run's
// nodes (n.axis), none (its own seconds) otherwise.
function onAxis(ax, s) { return ax ? ax.offset_s + ax.scale * s : s; }
function ownRange(n, ax) {
  var t = n.throughput, per = t.period_ms / 1e3;
  return [onAxis(ax, t.first_period * per), onAxis(ax, (t.first_period + t.periods) * per)];
}
// One x range for every node's throughput plot, so that the nodes line up;
// null when the nodes are not on one reference (one node's own report).
function sharedAxis(nodes) {
  if (!nodes.length || !nodes.every(function (n) { return n.axis; })) return null;
  var r = nodes.map(function (n) { return ownRange(n, n.axis); });
  return {x0: Math.min.apply(null, r.map(function (v) { return v[0]; })),
          x1: Math.max.apply(null, r.map(function (v) { return v[1]; })), reference: nodes[0].axis.reference};
}

function throughput(parent, n, shared) {
  var t = n.throughput, chans = t.channels, per = t.period_ms / 1e3;
  el('h3', {}, parent, 'Throughput: events per ' + t.period_ms + ' ms period');
  if (!chans.length) { el('p', {'class': 'note'}, parent, 'no channels'); return; }
  var ymax = 1;
  chans.forEach(function (c) { c.counts.forEach(function (v) { if (v > ymax) ymax = v; }); });
  var ax = shared ? n.axis : null, own = ownRange(n, ax);
  var x0 = shared ? shared.x0 : own[0], x1 = shared ? shared.x1 : own[1];
  var p = plot(parent, {x0: x0, x1: x1, y0: 0, y1: ymax, ylabel: 'events / period', cls: 'throughput',
                        xlabel: shared ? 'seconds since the trace start of ' + shared.reference + ' (the reference)'
                                       : 'seconds since trace start'});
  p.svg.setAttribute('data-x0', x0);
  p.svg.setAttribute('data-x1', x1);
  chans.forEach(function (c, k) {
    var pts = c.counts.map(function (v, i) {
      return p.x(onAxis(ax, (t.first_period + i + 0.5) * per)).toFixed(2) + ',' + p.y(v).toFixed(2);
    });
    sv('polyline', {points: pts.join(' '), fill: 'none', stroke: color(k), 'stroke-width': 1.5,
                    'data-channel': c.name, 'data-counts': c.counts.join(',')}, p.svg);
  });
  legend(parent, chans.map(function (c, k) { return {name: c.name, color: color(k)}; }));
  table(parent, 'throughput-totals', ['channel', 'events', 'mean / period', 'max / period'],
        chans.map(function (c) {
          return [c.name, {text: num(c.total), key: 'total'}, (c.total / t.periods).toFixed(3),
                  {text: num(Math.max.apply(null, c.counts)), key: 'max'}];
        }));
}

function latencyTable(parent, L) {
  el('h2', {}, parent, 'Latency per channel pair');
  if (!L.length) { el('p', {'class': 'note'}, parent, 'No channel pairs requested (cptrace report --pair FROM,TO or --path A,B,...).'); return; }
  var keys = [['count', 'count'], ['min_s', 'min'], ['p50_s', 'p50'], ['p90_s', 'p90'], ['p99_s', 'p99'], ['max_s', 'max'],
              ['width_p50_s', 'bound width p50'], ['width_max_s', 'bound width max']];
  table(parent, 'lat-stats', ['pair', 'kind'].concat(keys.map(function (k) { return k[1] + (k[0] === 'count' ? '' : ' (us)'); })),
        L.map(function (s) {
          return [s.from + ' -> ' + s.to, s.remote ? 'remote ' + s.from_node + ' -> ' + s.to_node : 'local (' + s.from_node + ')']
            .concat(keys.map(function (k) {
              var v = s.summary[k[0]];
              return {text: k[0] === 'count' ? num(v) : s.summary.count ? us(v) : '-', key: k[0]};
            }));
        }));
  L.forEach(function (s) {
    if (s.method) el('p', {'class': 'note method', 'data-pair': s.from + ' -> ' + s.to, 'data-nodes': s.from_node + ' -> ' + s.to_node},
                     parent, s.from + ' -> ' + s.to + ' (' + s.from_node + ' -> ' + s.to_node + '): ' + s.method);
    if (s.unmatched_from || s.unmatched_to || s.duplicates)
      el('p', {'class': 'note'}, parent, s.from + ' -> ' + s.to + ': ' + s.unmatched_from + ' tuple ids only on ' + s.from + ', ' +
         s.unmatched_to + ' only on ' + s.to + ', ' + s.duplicates + ' repeated.');
  });
}

// The nodes' packets: per flow and direction, `cptrace netlat --json`'s row
// (counts, p50/p90/p99/max with their strict bounds, in us; the ns in data-*),
// then the plots a channel pair gets.
function flows(parent, F) {
  el('h2', {}, parent, 'Flows: one-way delay, transmit on the sender -> receive on the receiver');
  var S = F.summary, rel = S.relation || {};
  el('p', {'class': 'note'}, parent, 'On ' + S.reference + '\'s clock, as cptrace netlat NODE_DIRS --reference ' + S.reference +
     ' gives it (relation: method ' + rel.method + ', clock model ' + rel.clock_model + ', inputs ' + rel.inputs + '); every bound strict.');
  var qs = ['p50', 'p90', 'p99', 'p100'];
  var bound = function (f, q) {
    var d = f.delay_ns && f.delay_ns[q];
    if (!d) return {text: '-', key: q};
    return {text: us(d.ns * 1e-9) + ' [' + us(d.lo * 1e-9) + ', ' + us(d.hi * 1e-9) + ']', key: q,
            data: {ns: d.ns, lo: d.lo, hi: d.hi}};
  };
  table(parent, 'flow-stats', ['flow', 'nodes', 'sent', 'retransmitted', 'received', 'out of order', 'matched', 'unbounded']
          .concat(qs.map(function (q) { return (q === 'p100' ? 'max' : q) + ' (us) [bound]'; })),
        S.flows.map(function (f) {
          return flowRow(f, ['sent', 'retransmitted', 'received', 'out_of_order', 'matched', 'unbounded'], qs, bound);
        }));
  var L = F.series.filter(function (s) { return s.summary.count > 0; });
  if (L.length) {
    boxes(parent, L);
    cdf(parent, L);
    overTime(parent, L);
  }
  if (S.writes) writes(el('div', {'class': 'writes'}, parent), S, F.write_series || [], bound, qs);
}

// One flow and direction of netlat's JSON as a table row: its name, its nodes,
// the counts `keys`, then each percentile with its bound.
function flowRow(f, keys, qs, bound) {
  return [{text: f.flow, key: 'flow'}, {text: f.from + ' -> ' + f.to, key: 'nodes'}]
    .concat(keys.map(function (k) { return {text: num(f[k]), key: k}; }))
    .concat(qs.map(function (q) { return bound(f, q); }));
}

// The application's view of the same flows (the nodes stamped their send
// calls): `cptrace netlat --writes --json`'s row per flow and direction, then
// the plots.
function writes(parent, S, series, bound, qs) {
  el('h2', {}, parent, 'Application\'s view: each TCP write or UDP datagram, send call -> the recv that returned it');
  el('p', {'class': 'note'}, parent, 'From the entry of the send call on the sender to the return of the recv that delivered the last byte, ' +
     'as cptrace netlat NODE_DIRS --reference ' + S.reference + ' --writes gives it; UDP datagrams are told apart by their first bytes, ' +
     'never by order (unidentified: not measured).');
  table(parent, 'write-stats', ['flow', 'nodes', 'writes', 'without call start', 'unidentified', 'undelivered', 'delivered', 'unbounded']
          .concat(qs.map(function (q) { return (q === 'p100' ? 'max' : q) + ' (us) [bound]'; })),
        S.writes.map(function (w) {
          return flowRow(w, ['writes', 'without_call_start', 'unidentified', 'undelivered', 'delivered', 'unbounded'], qs, bound);
        }));
  var L = series.filter(function (s) { return s.summary.count > 0; });
  if (!L.length) return;
  boxes(parent, L);
  cdf(parent, L);
  overTime(parent, L);
}

function latencyPlots(parent, L) {
  if (!L.length) return;
  el('h2', {}, parent, 'Latency plots');
  boxes(parent, L);
  cdf(parent, L);
  L.forEach(function (s, k) { hist(parent, s, k); });
  overTime(parent, L);
  widths(parent, L);
}

// One row per pair: the range the bounds reach (light), whiskers min..max, box p25..p75, median.
function boxes(parent, L) {
  el('h3', {}, parent, 'Distribution and bounds (box p25-p75, median, whiskers min-max; shaded: lowest lower bound to highest upper bound)');
  var S = L.filter(function (s) { return s.summary.count > 0; });
  if (!S.length) return;
  var lo = Math.min.apply(null, S.map(function (s) { return s.summary.lo_min_s; }));
  var hi = Math.max.apply(null, S.map(function (s) { return s.summary.hi_max_s; }));
  var row = 40, p = plot(parent, {x0: lo * 1e6, x1: hi * 1e6, y0: 0, y1: S.length, height: 60 + row * S.length,
                                  xlabel: 'microseconds', ylabel: '', yticks: false, cls: 'boxplot'});
  S.forEach(function (s, i) {
    var m = s.summary, cy = p.y(i + 0.5), X = function (v) { return p.x(v * 1e6); }, c = s.remote ? '#d62728' : '#1f77b4';
    var g = sv('g', {'class': 'box', 'data-pair': s.from + ' -> ' + s.to, 'data-p50': m.p50_s}, p.svg);
    sv('rect', {x: X(m.lo_min_s), y: cy - 14, width: Math.max(1, X(m.hi_max_s) - X(m.lo_min_s)), height: 28, fill: c, 'fill-opacity': 0.12}, g);
    sv('line', {x1: X(m.min_s), y1: cy, x2: X(m.max_s), y2: cy, stroke: c}, g);
    sv('rect', {x: X(m.p25_s), y: cy - 9, width: Math.max(1, X(m.p75_s) - X(m.p25_s)), height: 18, fill: c, 'fill-opacity': 0.45, stroke: c}, g);
    sv('line', {x1: X(m.p50_s), y1: cy - 9, x2: X(m.p50_s), y2: cy + 9, stroke: '#000', 'stroke-width': 2}, g);
    sv('text', {x: p.m.l + 4, y: cy - 16}, g, s.from + ' -> ' + s.to + (s.remote ? ' (remote)' : ' (local)'));
    sv('title', {}, g, 'p50 ' + us(m.p50_s) + ' us, bounds reach [' + us(m.lo_min_s) + ', ' + us(m.hi_max_s) + '] us');
  });
}

// Latencies are long-tailed (a p50 of tens of us beside a max of ms): a CDF on a
// log10 time axis shows the body and the tail at once, where a linear histogram
// squeezes the body into one bin.
function cdf(parent, L) {
  el('h3', {}, parent, 'Cumulative distribution (log time axis)');
  var S = L.filter(function (s) { return s.cdf && s.cdf.length; });
  if (!S.length) return;
  var pos = [], nonpos = 0;
  S.forEach(function (s) { s.cdf.forEach(function (q) { if (q[0] > 0) pos.push(q[0] * 1e6); else nonpos++; }); });
  if (!pos.length) { el('p', {'class': 'note'}, parent, 'no positive durations: nothing to draw on a log axis'); return; }
  var d0 = Math.floor(Math.log10(Math.min.apply(null, pos))), d1 = Math.ceil(Math.log10(Math.max.apply(null, pos)));
  if (d1 <= d0) d1 = d0 + 1;
  var p = plot(parent, {x0: d0, x1: d1, y0: 0, y1: 1, height: 260, xlabel: 'microseconds (log scale)',
                        ylabel: 'fraction of tuples <= x', xticks: false, cls: 'cdf'});
  p.svg.setAttribute('data-xscale', 'log10');
  for (var d = d0; d <= d1; d++) {
    var lbl = d >= 0 ? String(Math.pow(10, d)) : Math.pow(10, d).toFixed(-d);
    sv('line', {x1: p.x(d), y1: p.m.t, x2: p.x(d), y2: p.H - p.m.b + 4, stroke: '#ddd', 'class': 'decade'}, p.svg);
    sv('text', {x: p.x(d), y: p.H - p.m.b + 16, 'text-anchor': 'middle', 'class': 'xtick', 'data-us': lbl}, p.svg, lbl);
    for (var m = 2; m < 10 && d < d1; m++)
      sv('line', {x1: p.x(d + Math.log10(m)), y1: p.H - p.m.b, x2: p.x(d + Math.log10(m)), y2: p.H - p.m.b + 3, stroke: '#444'}, p.svg);
  }
  var X = function (v) { return p.x(v > 0 ? Math.max(d0, Math.log10(v * 1e6)) : d0).toFixed(2); };
  S.forEach(function (s, k) {
    // A step function: each point is reached at its value, from the previous fraction.
    var pts = [], prev = 0;
    s.cdf.forEach(function (q) { pts.push(X(q[0]) + ',' + p.y(prev).toFixed(2), X(q[0]) + ',' + p.y(q[1]).toFixed(2)); prev = q[1]; });
    sv('polyline', {points: pts.join(' '), fill: 'none', stroke: color(k), 'stroke-width': 1.5, 'data-pair': s.from + ' -> ' + s.to,
                    'data-nodes': s.from_node + ' -> ' + s.to_node, 'data-points': s.cdf.length}, p.svg);
  });
  legend(parent, S.map(function (s, k) { return {name: s.from_node + ' -> ' + s.to_node + ': ' + s.from + ' -> ' + s.to, color: color(k)}; }));
  if (nonpos) el('p', {'class': 'note'}, parent, nonpos + ' CDF point(s) at or below 0 us are drawn at the left edge.');
}

// Per hop of a pipeline path and end to end: p50/p90/p99 and the strict bound of
// each percentile ([that percentile of the lower bounds, of the upper bounds]).
function pathTable(parent, P) {
  var sec = el('section', {'class': 'path'}, parent);
  el('h2', {}, sec, 'Pipeline path ' + P.channels.join(' -> '));
  var e = P.end_to_end, bound = function (q) { return us(e[q] * 1e-9) + ' us [' + us(e[q + '_lo'] * 1e-9) + ', ' + us(e[q + '_hi'] * 1e-9) + ']'; };
  el('p', {'class': 'end-to-end', 'data-count': e.count}, sec, 'End to end ' + e.from + ' -> ' + e.to + ': ' +
     (e.count ? 'p50 ' + bound('p50') + ', p90 ' + bound('p90') + ', p99 ' + bound('p99') + ' over ' + e.count + ' tuples'
              : 'no tuple on both channels'));
  var qs = ['p50', 'p90', 'p99'], t = el('table', {'class': 'path-hops'}, sec), tr = el('tr', {}, t);
  ['hop', 'count'].concat([].concat.apply([], qs.map(function (q) { return [q + ' (us)', q + ' bound (us)']; })))
    .forEach(function (h, i) { el('th', {'class': i ? '' : 'l'}, tr, h); });
  P.hops.map(function (h) { return [h, 'hop']; }).concat([[P.end_to_end, 'end-to-end']]).forEach(function (hk) {
    var h = hk[0], r = el('tr', {'data-hop': h.from + ' -> ' + h.to, 'data-kind': hk[1]}, t);
    el('td', {'class': 'l'}, r, (hk[1] === 'hop' ? '' : 'end to end: ') + h.from + ' -> ' + h.to);
    el('td', {'data-key': 'count'}, r, num(h.count));
    qs.forEach(function (q) {
      var lo = h[q + '_lo'], hi = h[q + '_hi'];
      el('td', {'data-key': q, 'data-ns': h[q]}, r, h.count ? us(h[q] * 1e-9) : '-');
      el('td', {'data-key': q + '_bound', 'data-lo-ns': lo, 'data-hi-ns': hi}, r,
                 h.count ? '[' + us(lo * 1e-9) + ', ' + us(hi * 1e-9) + ']' : '-');
    });
  });
  el('p', {'class': 'note'}, sec, 'The same computation as cptrace latency --from X --to Y --json; the end-to-end row is ' +
     'measured from ' + P.channels[0] + ' to ' + P.channels[P.channels.length - 1] + ' (percentiles do not add up).');
}

function hist(parent, s, k) {
  var h = s.histogram;
  el('h3', {}, parent, 'Histogram ' + s.from + ' -> ' + s.to + (s.remote ? ' (remote)' : ' (local)'));
  if (!h) { el('p', {'class': 'note'}, parent, 'no paired tuples'); return; }
  var n = h.counts.length, ymax = Math.max.apply(null, h.counts), lo = h.lo_s * 1e6, hi = h.hi_s * 1e6;
  if (!(hi > lo)) hi = lo + 1;
  var p = plot(parent, {x0: lo, x1: hi, y0: 0, y1: ymax, height: 200, xlabel: 'microseconds', ylabel: 'tuples', cls: 'histogram'});
  var bw = (hi - lo) / n;
  h.counts.forEach(function (v, i) {
    var r = sv('rect', {x: p.x(lo + i * bw), y: p.y(v), width: Math.max(0.5, p.x(lo + (i + 1) * bw) - p.x(lo + i * bw) - 0.5),
                        height: p.y(0) - p.y(v), fill: s.remote ? '#d62728' : color(k), 'data-count': v}, p.svg);
    sv('title', {}, r, (lo + i * bw).toFixed(3) + ' .. ' + (lo + (i + 1) * bw).toFixed(3) + ' us: ' + v);
  });
}

// Latency over time, one plot per series: p50 and p99 per period, each with the
// band its strict bound gives (the true percentile lies in it), and the max.
function overTime(parent, L) {
  var S = L.filter(function (s) { return s.over_time && s.over_time.length; });
  if (!S.length) return;
  el('h3', {}, parent, 'Latency over time (p50, p99 with their bounds; max)');
  S.forEach(function (s) {
    var P = s.over_time, mid = function (q) { return (q.from_s + q.to_s) / 2; };
    var x0 = P[0].from_s, x1 = P[P.length - 1].to_s;
    var y0 = Math.min.apply(null, P.map(function (q) { return q.p50_lo_s; })) * 1e6;
    var y1 = Math.max.apply(null, P.map(function (q) { return Math.max(q.p99_hi_s, q.max_s); })) * 1e6;
    el('h4', {}, parent, s.from + ' -> ' + s.to + ' (' + (s.remote ? s.from_node + ' -> ' + s.to_node : 'local ' + s.from_node) + ')');
    var p = plot(parent, {x0: x0, x1: x1 > x0 ? x1 : x0 + 1, y0: Math.min(0, y0), y1: y1 > y0 ? y1 : y0 + 1, height: 220,
                          xlabel: 'seconds since trace start', ylabel: 'microseconds', cls: 'over-time'});
    var g = sv('g', {'class': 'series', 'data-pair': s.from + ' -> ' + s.to, 'data-nodes': s.from_node + ' -> ' + s.to_node}, p.svg);
    var xy = function (t, v) { return p.x(t).toFixed(2) + ',' + p.y(v * 1e6).toFixed(2); };
    [['p50', '#1f77b4'], ['p99', '#d62728']].forEach(function (c) {
      var q = c[0], upper = P.map(function (r) { return xy(mid(r), r[q + '_hi_s']); });
      var lower = P.map(function (r) { return xy(mid(r), r[q + '_lo_s']); }).reverse();
      sv('polygon', {points: upper.concat(lower).join(' '), fill: c[1], 'fill-opacity': 0.18, stroke: 'none', 'class': 'band',
                     'data-quantile': q, 'data-lo': P.map(function (r) { return r[q + '_lo_s']; }).join(','),
                     'data-hi': P.map(function (r) { return r[q + '_hi_s']; }).join(',')}, g);
      sv('polyline', {points: P.map(function (r) { return xy(mid(r), r[q + '_s']); }).join(' '), fill: 'none', stroke: c[1],
                      'stroke-width': 1.5, 'class': 'estimate', 'data-quantile': q,
                      'data-values': P.map(function (r) { return r[q + '_s']; }).join(',')}, g);
    });
    sv('polyline', {points: P.map(function (r) { return xy(mid(r), r.max_s); }).join(' '), fill: 'none', stroke: '#555',
                    'stroke-dasharray': '3,3', 'class': 'estimate', 'data-quantile': 'max',
                    'data-values': P.map(function (r) { return r.max_s; }).join(',')}, g);
    P.forEach(function (r) {
      var c = sv('circle', {cx: p.x(mid(r)), cy: p.y(r.p50_s * 1e6), r: 2, fill: '#1f77b4'}, g);
      sv('title', {}, c, r.from_s.toFixed(3) + ' .. ' + r.to_s.toFixed(3) + ' s, ' + r.count + ' tuples: p50 ' + us(r.p50_s) +
         ' us [' + us(r.p50_lo_s) + ', ' + us(r.p50_hi_s) + '], p99 ' + us(r.p99_s) + ' us [' + us(r.p99_lo_s) + ', ' +
         us(r.p99_hi_s) + '], max ' + us(r.max_s) + ' us [' + us(r.max_lo_s) + ', ' + us(r.max_hi_s) + ']');
    });
    legend(parent, [{name: 'p50 (band: its bound)', color: '#1f77b4'}, {name: 'p99 (band: its bound)', color: '#d62728'},
                    {name: 'max', color: '#555'}]);
  });
}

function widths(parent, L) {
  el('h3', {}, parent, 'Bound width over time, per node pair');
  var S = L.filter(function (s) { return s.width_over_time.length; });
  if (!S.length) return;
  var all = [];
  S.forEach(function (s) { s.width_over_time.forEach(function (pt) { all.push(pt); }); });
  var x0 = Math.min.apply(null, all.map(function (p) { return p[0]; })), x1 = Math.max.apply(null, all.map(function (p) { return p[0]; }));
  var y1 = Math.max.apply(null, all.map(function (p) { return p[1] * 1e6; }));
  var p = plot(parent, {x0: x0, x1: x1 > x0 ? x1 : x0 + 1, y0: 0, y1: y1 > 0 ? y1 : 1, height: 220,
                        xlabel: 'seconds since trace start', ylabel: 'bound width (us)', cls: 'widths'});
  S.forEach(function (s, k) {
    sv('polyline', {points: s.width_over_time.map(function (q) { return p.x(q[0]).toFixed(2) + ',' + p.y(q[1] * 1e6).toFixed(2); }).join(' '),
                    fill: 'none', stroke: color(k), 'stroke-width': 1.5, 'data-pair': s.from + ' -> ' + s.to,
                    'data-nodes': s.from_node + ' -> ' + s.to_node}, p.svg);
  });
  legend(parent, S.map(function (s, k) { return {name: s.from_node + ' -> ' + s.to_node + ': ' + s.from + ' -> ' + s.to, color: color(k)}; }));
}

try {
  var D = JSON.parse(document.getElementById('cptrace-data').textContent);
  // The question people come with first (end to end, per hop, per pair, with
  // bounds), then the nodes, then the plots behind the latency numbers.
  if (D.path) pathTable(root, D.path);
  latencyTable(el('section', {'class': 'latency-summary'}, root), D.latency);
  var shared = sharedAxis(D.nodes);
  D.nodes.forEach(function (n) {
    var sec = el('section', {'class': 'node', 'data-node': n.overview.node}, root);
    el('h2', {}, sec, 'Node ' + n.overview.node);
    overview(sec, n);
    throughput(sec, n, shared);
    drops(sec, n);
    clockAdjustments(sec, n);
  });
  if (!D.nodes.length && D.run_nodes.length)
    el('p', {'class': 'note no-nodes'}, root, 'Throughput and drops per node: give each node\'s own trace with --node-dir ' +
       '(nodes of this run: ' + D.run_nodes.join(', ') + ').');
  latencyPlots(el('section', {'class': 'latency'}, root), D.latency);
  if (D.flows) flows(el('section', {'class': 'flows'}, root), D.flows);
  root.setAttribute('data-rendered', '1');
} catch (e) {
  el('p', {'class': 'js-error'}, root, 'report script failed: ' + e);
}
})();
