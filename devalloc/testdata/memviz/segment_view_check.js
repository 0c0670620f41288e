// segment_view_check.js runs PyTorch's memory viewer over pickled
// snapshots the way a user clicking through it would: the viewer's own
// unpickler, its annotation pass, and its "Allocator State History" view
// (MemoryView) drawn at every event index of every device, with every
// drawn segment and block hovered (the tooltip text is built then).
//
// The viewer is torch/utils/viz/MemoryViz.js from a PyTorch source
// checkout (the wheels do not ship it), read from disk unmodified. It is an ES module that imports d3 from a
// CDN and builds its page at load time, so this harness evaluates its text
// in a node vm context: each import statement becomes a binding to a small
// d3 stand-in below (a DOM-less element tree with d3's selection and data
// join semantics), "export" keywords are dropped, and the top-level
// functions are then looked up by name. Line numbers are kept, so a stack
// trace points into the real file. README.md says what is stubbed.
//
// usage: node segment_view_check.js MemoryViz.js snapshot.pickle...
//
// It prints one JSON line to stdout (per file and device: the number of
// event indexes, how many drew, draw's [reserved, allocated] at the last
// index, and the indexes that threw, as ranges) and a summary to stderr.
// Exit status: 0 when every index of every device drew; 1 when a draw,
// a hover, the unpickling or the annotation threw (the summary names the
// indexes and the first error of each range); 2 when MemoryViz.js cannot
// be loaded, lacks a function this harness calls, or used a part of d3
// that the stand-in lacks: a PyTorch version this harness does not know,
// not a fault of the snapshot.
'use strict';

const fs = require('node:fs');
const vm = require('node:vm');

// The viewer's functions this harness calls, by their names in
// MemoryViz.js.
const REQUIRED = ['unpickle', 'annotate_snapshot', 'StackInfo', 'MemoryView'];

function usageExit(msg) {
  process.stderr.write(`segment_view_check: ${msg}\n`);
  process.exit(2);
}

// StubGap is thrown when the viewer touches a part of d3 or of the DOM
// that the stand-in does not provide: the harness needs updating, the
// snapshot is not at fault.
class StubGap extends Error {
  constructor(what) {
    super(`the harness's d3/DOM stand-in has no ${what}`);
    this.name = 'StubGap';
  }
}

// strict wraps a stand-in so that reading a property it lacks throws a
// StubGap naming it, instead of yielding undefined and a TypeError that
// would look like the viewer failing on the snapshot.
function strict(target, what) {
  return new Proxy(target, {
    get(t, prop, recv) {
      if (typeof prop === 'symbol' || prop in t) {
        return Reflect.get(t, prop, recv);
      }
      throw new StubGap(`${what}.${prop}`);
    },
  });
}

// ---- A DOM-less element tree ----------------------------------------

class Element {
  constructor(tag) {
    this.tagName = tag;
    this.parentNode = null;
    this.children = [];
    this.attributes = {};
    this.style = {};
    this.textContent = '';
    this.innerHTML = '';
    this.listeners = {};
    this.__data__ = undefined;
    // <select> and <input> state the viewer reads and sets.
    this.value = '';
    this.selectedIndex = -1;
  }

  get options() {
    return this.children.filter(c => c.tagName === 'option');
  }

  appendChild(child) {
    if (child.parentNode !== null) {
      child.remove();
    }
    child.parentNode = this;
    this.children.push(child);
    return child;
  }

  remove() {
    const p = this.parentNode;
    if (p !== null) {
      p.children.splice(p.children.indexOf(this), 1);
      this.parentNode = null;
    }
  }

  scrollIntoViewIfNeeded() {}
}

function element(tag) {
  return strict(new Element(tag), `<${tag}> element`);
}

// descendants lists root's descendants in document order, those with
// tag only when tag is given.
function descendants(root, tag) {
  const out = [];
  const walk = n => {
    for (const c of n.children) {
      if (tag === undefined || c.tagName === tag) {
        out.push(c);
      }
      walk(c);
    }
  };
  walk(root);
  return out;
}

// ---- d3's selection, as far as a one-group selection goes ------------

// EnterNode is a placeholder of a data join's enter selection: appending
// to it creates a child of its parent bound to its datum.
class EnterNode {
  constructor(parent, datum) {
    this.parent = parent;
    this.__data__ = datum;
  }
}

function selection(nodes, parent) {
  return strict(new Selection(nodes, parent), 'd3 selection');
}

function isTag(selector) {
  return typeof selector === 'string' && /^[A-Za-z][A-Za-z0-9-]*$/.test(selector);
}

class Selection {
  constructor(nodes, parent) {
    this._nodes = nodes;
    this._parent = parent;
    this._enter = [];
    this._exit = [];
  }

  // _values sets each node's value, calling a function value as d3 does:
  // this = node, (d, i, nodes).
  _values(value, set) {
    this._nodes.forEach((n, i) => {
      if (n === null) {
        return;
      }
      if (n instanceof EnterNode) {
        throw new StubGap('setter on an enter selection (d3 has none either)');
      }
      set(n, typeof value === 'function' ? value.call(n, n.__data__, i, this._nodes) : value);
    });
    return this;
  }

  append(tag) {
    if (typeof tag !== 'string') {
      throw new StubGap('selection.append of a non-string');
    }
    const out = this._nodes.map(n => {
      if (n === null) {
        return null;
      }
      const c = element(tag);
      if (n instanceof EnterNode) {
        c.__data__ = n.__data__;
        n.parent.appendChild(c);
      } else {
        // d3 propagates the parent's datum to an appended child.
        if (n.__data__ !== undefined) {
          c.__data__ = n.__data__;
        }
        n.appendChild(c);
      }
      return c;
    });
    return selection(out, this._parent);
  }

  attr(name, value) {
    if (arguments.length < 2) {
      const n = this.node();
      return n === null ? undefined : n.attributes[name];
    }
    return this._values(value, (n, v) => {
      if (v === null || v === undefined) {
        delete n.attributes[name];
      } else {
        n.attributes[name] = String(v);
      }
    });
  }

  style(name, value) {
    if (arguments.length < 2) {
      const n = this.node();
      return n === null ? undefined : n.style[name];
    }
    return this._values(value, (n, v) => {
      n.style[name] = v === null || v === undefined ? undefined : String(v);
    });
  }

  property(name, value) {
    if (arguments.length < 2) {
      const n = this.node();
      return n === null ? undefined : n[name];
    }
    return this._values(value, (n, v) => {
      n[name] = v;
    });
  }

  text(value) {
    if (arguments.length < 1) {
      const n = this.node();
      return n === null ? undefined : n.textContent;
    }
    return this._values(value, (n, v) => {
      for (const c of [...n.children]) {
        c.remove();
      }
      n.textContent = v === null || v === undefined ? '' : String(v);
    });
  }

  html(value) {
    if (arguments.length < 1) {
      const n = this.node();
      return n === null ? undefined : n.innerHTML;
    }
    return this._values(value, (n, v) => {
      for (const c of [...n.children]) {
        c.remove();
      }
      n.innerHTML = v === null || v === undefined ? '' : String(v);
    });
  }

  select(selector) {
    if (!isTag(selector)) {
      throw new StubGap(`selection.select(${JSON.stringify(selector)}) (tag names only)`);
    }
    const out = this._nodes.map(n => {
      if (n === null || n instanceof EnterNode) {
        return null;
      }
      const c = descendants(n, selector)[0] || null;
      if (c !== null && n.__data__ !== undefined) {
        c.__data__ = n.__data__;
      }
      return c;
    });
    return selection(out, this._parent);
  }

  selectAll(selector) {
    if (!isTag(selector)) {
      throw new StubGap(`selection.selectAll(${JSON.stringify(selector)}) (tag names only)`);
    }
    const ns = this._nodes.filter(n => n !== null);
    if (ns.length !== 1 || ns[0] instanceof EnterNode) {
      throw new StubGap(`selectAll on a selection of ${ns.length} nodes (one only)`);
    }
    return selection(descendants(ns[0], selector), ns[0]);
  }

  data(values, key) {
    if (arguments.length < 1) {
      return this._nodes.map(n => (n === null ? undefined : n.__data__));
    }
    if (key !== undefined || typeof values === 'function') {
      throw new StubGap('selection.data with a key or a function');
    }
    const data = Array.from(values);
    const update = [];
    const enter = [];
    for (let i = 0; i < data.length; i++) {
      if (i < this._nodes.length && this._nodes[i] !== null) {
        this._nodes[i].__data__ = data[i];
        update.push(this._nodes[i]);
      } else {
        enter.push(new EnterNode(this._parent, data[i]));
      }
    }
    const s = selection(update, this._parent);
    s._enter = enter;
    s._exit = this._nodes.slice(data.length);
    return s;
  }

  enter() {
    return selection(this._enter, this._parent);
  }

  exit() {
    return selection(this._exit, this._parent);
  }

  remove() {
    for (const n of this._nodes) {
      if (n !== null && !(n instanceof EnterNode)) {
        n.remove();
      }
    }
    return this;
  }

  on(type, listener) {
    if (arguments.length < 2) {
      const n = this.node();
      return n === null ? undefined : n.listeners[type];
    }
    for (const n of this._nodes) {
      if (n !== null && !(n instanceof EnterNode)) {
        if (listener === null) {
          delete n.listeners[type];
        } else {
          n.listeners[type] = listener;
        }
      }
    }
    return this;
  }

  call(fn, ...args) {
    fn(this, ...args);
    return this;
  }

  each(fn) {
    this._nodes.forEach((n, i) => {
      if (n !== null) {
        fn.call(n, n.__data__, i, this._nodes);
      }
    });
    return this;
  }

  node() {
    for (const n of this._nodes) {
      if (n !== null) {
        return n;
      }
    }
    return null;
  }

  nodes() {
    return this._nodes.filter(n => n !== null);
  }

  datum(value) {
    if (arguments.length < 1) {
      const n = this.node();
      return n === null ? undefined : n.__data__;
    }
    return this._values(value, (n, v) => {
      n.__data__ = v;
    });
  }

  empty() {
    return this.node() === null;
  }

  size() {
    return this.nodes().length;
  }
}

// ---- d3's scales and behaviours ----------------------------------------

// linear is d3.scaleLinear over numbers: a degenerate domain maps to the
// middle of the range, as d3's does.
function linear() {
  let domain = [0, 1];
  let range = [0, 1];
  const map = (x, [d0, d1], [r0, r1]) => {
    const t = d1 === d0 ? 0.5 : (x - d0) / (d1 - d0);
    return r0 + t * (r1 - r0);
  };
  const scale = x => map(+x, domain, range);
  scale.domain = function (d) {
    if (arguments.length < 1) {
      return domain.slice();
    }
    domain = Array.from(d, Number);
    return scale;
  };
  scale.range = function (r) {
    if (arguments.length < 1) {
      return range.slice();
    }
    range = Array.from(r, Number);
    return scale;
  };
  scale.invert = y => map(+y, range, domain);
  scale.copy = () => linear().domain(domain).range(range);
  scale.ticks = () => [];
  scale.tickFormat = () => String;
  return strict(scale, 'd3 scaleLinear');
}

// behaviour stands in for d3.zoom, d3.brushX and d3.axisLeft: a function
// applied to a selection with call, whose setters chain. The viewer's
// segment view creates a zoom but never zooms here.
function behaviour(what, setters) {
  const b = function (_selection) {};
  const on = {};
  b.on = function (type, listener) {
    if (arguments.length < 2) {
      return on[type];
    }
    on[type] = listener;
    return b;
  };
  for (const name of setters) {
    b[name] = function (...args) {
      return arguments.length < 1 ? undefined : b;
    };
  }
  return strict(b, what);
}

function transform(k, x, y) {
  return strict(
    {
      k,
      x,
      y,
      scale: s => transform(k * s, x, y),
      translate: (tx, ty) => transform(k, x + k * tx, y + k * ty),
      rescaleY: s => s.copy().domain(s.range().map(v => (v - y) / k).map(s.invert)),
      toString: () => `translate(${x},${y}) scale(${k})`,
    },
    'd3 zoom transform',
  );
}

// ---- The document and the d3 namespace ----------------------------------

const documentRoot = new Element('html');
const head = documentRoot.appendChild(element('head'));
const body = documentRoot.appendChild(element('body'));

function select(x) {
  if (isTag(x)) {
    const n = x === 'html' ? documentRoot : descendants(documentRoot, x)[0] || null;
    return selection([n], documentRoot);
  }
  if (x instanceof Element || (x !== null && typeof x === 'object' && 'tagName' in x && 'children' in x)) {
    return selection([x], null);
  }
  throw new StubGap(`d3.select(${typeof x === 'string' ? JSON.stringify(x) : typeof x})`);
}

const d3Target = {
  event: null,
  select,
  selectAll(x) {
    if (!isTag(x)) {
      throw new StubGap(`d3.selectAll(${JSON.stringify(x)}) (tag names only)`);
    }
    return selection(descendants(documentRoot, x), documentRoot);
  },
  scaleLinear: linear,
  zoom: () => behaviour('d3 zoom', ['transform', 'scaleExtent', 'translateExtent', 'extent', 'filter']),
  zoomIdentity: transform(1, 0, 0),
  brushX: () => behaviour('d3 brushX', ['extent', 'move']),
  axisLeft: scale =>
    behaviour('d3 axisLeft', ['scale', 'tickFormat', 'ticks', 'tickSize', 'tickValues']),
};
const d3 = strict(d3Target, 'd3');

// ---- Loading MemoryViz.js --------------------------------------------------

// bindImports turns each `import ... from "spec";` into const bindings to
// the stand-in, keeping the statement's line count. Every d3 package
// (d3, d3-axis, d3-scale, ...) resolves to the one d3 namespace, as the
// d3 bundle re-exports them all.
function bindImports(src) {
  const problems = [];
  const out = src.replace(
    /^[ \t]*import\s+([^'";]*?)\s*from\s*(["'])([^"']+)\2[ \t]*;?/gm,
    (stmt, clause, _q, spec) => {
      const lines = '\n'.repeat((stmt.match(/\n/g) || []).length);
      const pkg = spec.replace(/^[a-z]+:\/\/[^/]+\//i, '').split('/')[0].split('@')[0];
      if (pkg !== 'd3' && !pkg.startsWith('d3-')) {
        problems.push(`it imports ${JSON.stringify(spec)}, which the harness has no stand-in for`);
        return lines;
      }
      const decls = [];
      for (let part of clause.split(/,(?![^{]*\})/)) {
        part = part.trim();
        let m;
        if ((m = /^\*\s*as\s+([\w$]+)$/.exec(part))) {
          decls.push(`const ${m[1]} = __accelkit_d3;`);
        } else if ((m = /^\{([\s\S]*)\}$/.exec(part))) {
          for (const spec1 of m[1].split(',').map(s => s.trim()).filter(Boolean)) {
            const [name, local = name] = spec1.split(/\s+as\s+/).map(s => s.trim());
            if (!(name in d3Target)) {
              problems.push(`it imports ${name} from ${JSON.stringify(spec)}, which the d3 stand-in lacks`);
              continue;
            }
            decls.push(`const ${local} = __accelkit_d3.${name};`);
          }
        } else {
          problems.push(`it imports ${JSON.stringify(part)} from ${JSON.stringify(spec)} (a default import, which d3 has none of)`);
        }
      }
      return decls.join(' ') + lines;
    },
  );
  const left = /^[ \t]*import\b.*$/m.exec(out);
  if (left !== null) {
    problems.push(`an import the harness cannot read: ${JSON.stringify(left[0].trim())}`);
  }
  return [out, problems];
}

// dropExports removes `export` from exported declarations (the harness
// reaches every top-level function by name).
function dropExports(src) {
  const problems = [];
  let out = src.replace(
    /^([ \t]*)export\s+(?:default\s+)?(?=(?:async\s+)?function\b|class\b|const\b|let\b|var\b)/gm,
    '$1',
  );
  out = out.replace(/^[ \t]*export\s*\{[^}]*\}\s*;?/gm, stmt => '\n'.repeat((stmt.match(/\n/g) || []).length));
  const left = /^[ \t]*export\b.*$/m.exec(out);
  if (left !== null) {
    problems.push(`an export the harness cannot read: ${JSON.stringify(left[0].trim())}`);
  }
  return [out, problems];
}

function load(path) {
  let src;
  try {
    src = fs.readFileSync(path, 'utf8');
  } catch (e) {
    usageExit(`cannot read MemoryViz.js: ${e.message}`);
  }
  const [imported, p1] = bindImports(src);
  const [code, p2] = dropExports(imported);
  const problems = [...p1, ...p2];
  if (problems.length > 0) {
    usageExit(`${path}: ${problems.join('; ')}`);
  }
  const logs = [];
  const ctx = vm.createContext({
    __accelkit_d3: d3,
    TextDecoder,
    // The viewer logs the whole snapshot when it loads one; kept quiet.
    console: {log: () => {}, info: () => {}, debug: () => {}, warn: (...a) => logs.push(a.join(' ')), error: (...a) => logs.push(a.join(' '))},
  });
  try {
    // Modules are strict; the prefix keeps line 1 on line 1.
    new vm.Script(`'use strict';${code}`, {filename: path}).runInContext(ctx);
  } catch (e) {
    usageExit(`${path} threw while loading (its top-level code ran against the harness's stand-ins): ${describe(e)}`);
  }
  const fns = {};
  const missing = [];
  for (const name of REQUIRED) {
    const f = vm.runInContext(`typeof ${name} === 'function' ? ${name} : undefined`, ctx);
    if (f === undefined) {
      missing.push(name);
    }
    fns[name] = f;
  }
  if (missing.length > 0) {
    usageExit(
      `${path} defines no top-level function ${missing.join(', ')} (the harness calls ${REQUIRED.join(', ')}; ` +
        'see testdata/memviz/README.md for the PyTorch version it was written against)',
    );
  }
  fns.newArrayBuffer = vm.runInContext('n => new ArrayBuffer(n)', ctx);
  return fns;
}

// describe gives an error's message and where in MemoryViz.js it was
// thrown (errors of the vm's realm are not instances of this realm's
// Error, hence no instanceof).
function describe(e) {
  if (e === null || typeof e !== 'object') {
    return `threw ${String(e)}`;
  }
  const msg = `${e.name || 'Error'}: ${e.message}`;
  const at = String(e.stack || '')
    .split('\n')
    .slice(1)
    .map(s => s.trim())
    .find(s => /MemoryViz|\.js:\d+/.test(s) && !s.includes('segment_view_check.js'));
  return at === undefined ? msg : `${msg} (${at})`;
}

// ---- Drawing ---------------------------------------------------------------

// hover fires mouseover then mouseleave on every element under root that
// has them, with d3.event set as d3 sets it: the viewer builds a tooltip
// from the datum then.
function hover(root) {
  for (const el of descendants(root)) {
    for (const type of ['mouseover', 'mouseleave']) {
      const listener = el.listeners[type];
      if (listener === undefined) {
        continue;
      }
      d3Target.event = {type, target: el, preventDefault() {}, stopPropagation() {}};
      try {
        listener.call(el, el.__data__, 0, [el]);
      } catch (e) {
        if (e instanceof StubGap) {
          throw e;
        }
        throw {hover: `hovering a <${el.tagName}>: ${describe(e)}`};
      } finally {
        d3Target.event = null;
      }
    }
  }
}

function checkDevice(fns, snap, device) {
  const events = snap.device_traces[device] || [];
  // With no events the viewer selects nothing and draws index 0.
  const n = Math.max(events.length, 1);
  const res = {device, events: events.length, drawn: 0, reserved: null, allocated: null, failures: []};
  const fail = (idx, error) => {
    const last = res.failures.at(-1);
    if (last !== undefined && last.to === idx - 1) {
      last.to = idx;
    } else {
      res.failures.push({from: idx, to: idx, error});
    }
  };
  // As create_segment_view lays it out.
  const outer = select('body').append('div').append('div');
  let view;
  try {
    const stackInfo = fns.StackInfo(outer);
    view = fns.MemoryView(outer, stackInfo, snap, device);
  } catch (e) {
    if (e instanceof StubGap) {
      throw e;
    }
    for (let idx = 0; idx < n; idx++) {
      fail(idx, `MemoryView(...) threw: ${describe(e)}`);
    }
    return res;
  }
  for (let idx = 0; idx < n; idx++) {
    let drawn;
    try {
      drawn = view.draw(idx);
      hover(outer.node());
    } catch (e) {
      if (e instanceof StubGap) {
        throw e;
      }
      fail(idx, e !== null && typeof e === 'object' && 'hover' in e ? e.hover : `draw(${idx}) threw: ${describe(e)}`);
      continue;
    }
    if (!Array.isArray(drawn) || drawn.length !== 2 || !drawn.every(Number.isFinite)) {
      usageExit(`MemoryView(...).draw(${idx}) returned ${JSON.stringify(drawn)}, not [reserved, allocated]`);
    }
    res.drawn++;
    if (idx === n - 1) {
      [res.reserved, res.allocated] = drawn;
    }
  }
  outer.node().parentNode.remove();
  return res;
}

function checkFile(fns, file) {
  const res = {file, devices: []};
  let bytes;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    usageExit(`cannot read ${file}: ${e.message}`);
  }
  const buffer = fns.newArrayBuffer(bytes.length);
  new Uint8Array(buffer).set(bytes);
  let snap;
  try {
    snap = fns.unpickle(buffer);
  } catch (e) {
    res.error = `unpickle threw: ${describe(e)}`;
    return res;
  }
  if (snap === null || typeof snap !== 'object' || !Array.isArray(snap.segments) || !Array.isArray(snap.device_traces)) {
    res.error = 'the unpickled object has no segments and device_traces lists';
    return res;
  }
  try {
    fns.annotate_snapshot(snap);
  } catch (e) {
    res.error = `annotate_snapshot threw: ${describe(e)}`;
    return res;
  }
  // The devices the viewer offers: a trace or a segment.
  const devices = new Set();
  snap.device_traces.forEach((tr, i) => {
    if (tr.length > 0) {
      devices.add(i);
    }
  });
  for (const s of snap.segments) {
    devices.add(s.device);
  }
  for (const device of [...devices].sort((a, b) => a - b)) {
    res.devices.push(checkDevice(fns, snap, device));
  }
  return res;
}

function main(argv) {
  if (argv.length < 2) {
    usageExit('usage: node segment_view_check.js MemoryViz.js snapshot.pickle...');
  }
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 18) {
    usageExit(`node ${process.versions.node} is too old for MemoryViz.js (Array.prototype.at, findLastIndex): 18 or later`);
  }
  const [vizPath, ...files] = argv;
  const fns = load(vizPath);
  const report = {viewer: vizPath, files: []};
  let failed = false;
  for (const file of files) {
    let res;
    try {
      res = checkFile(fns, file);
    } catch (e) {
      if (e instanceof StubGap) {
        usageExit(`${file}: ${e.message}, which ${vizPath} used: ${describe(e)}`);
      }
      throw e;
    }
    report.files.push(res);
    if (res.error !== undefined) {
      failed = true;
      process.stderr.write(`${file}: ${res.error}\n`);
      continue;
    }
    for (const d of res.devices) {
      const n = Math.max(d.events, 1);
      process.stderr.write(`${file}: device ${d.device}: ${d.drawn} of ${n} event indexes drew\n`);
      for (const f of d.failures) {
        failed = true;
        const which = f.from === f.to ? `index ${f.from}` : `indexes ${f.from}-${f.to}`;
        process.stderr.write(`  ${which} threw: ${f.error}\n`);
      }
    }
  }
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exitCode = failed ? 1 : 0;
}

main(process.argv.slice(2));
