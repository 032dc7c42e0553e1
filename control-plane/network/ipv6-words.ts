/** The eight 16-bit words of an IPv6 literal (brackets, a zone and a dotted IPv4 tail allowed), or null. */
export function ipv6Words(address: string): number[] | null {
  let text = address.toLowerCase().replace(/^\[|\]$/g, '').split('%')[0];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const parts = dotted[1].split('.').map(Number);
    text = text.slice(0, -dotted[1].length) + `${((parts[0] << 8) | parts[1]).toString(16)}:${((parts[2] << 8) | parts[3]).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const missing = 8 - left.length - right.length;
  if (text.includes('::') ? missing < 0 : left.length !== 8) return null;
  return [...left, ...Array(text.includes('::') ? missing : 0).fill('0'), ...right].map((word) => parseInt(word, 16));
}
