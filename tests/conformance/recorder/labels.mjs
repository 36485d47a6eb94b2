// Ids that differ from run to run, made stable: a stored message's id becomes its label
// (`t3:assistant0`: the first assistant message first stored in turn 3; a scripted user
// message keeps its own id), any other UUID becomes `<id>`, random cycle and group ids
// lose their random part. The replay labels our gateway's ids by the same rules.
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const CYCLE = /\b(buffer-obs|reflect-buf|reflect-act)-\d+-[a-z0-9]+/g;
const GROUP = /(["`])[0-9a-f]{16}\1/g;

function relabelText(text, ids) {
  let out = text;
  for (const [id, label] of ids) {
    if (id !== label && out.includes(id)) out = out.split(id).join(label);
  }
  return out.replace(UUID, '<id>').replace(CYCLE, '$1-<id>').replace(GROUP, '$1<group>$1');
}

export function relabel(value, labels) {
  const ids = [...labels].sort((a, b) => b[0].length - a[0].length); // longest first: no id is cut by a shorter one
  const walk = v => {
    if (typeof v === 'string') return relabelText(v, ids);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value);
}
