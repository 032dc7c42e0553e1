import { ToolCallScanner, type ScannedCallPart } from '../../worker-agent/llama/tool-call-scanner';

/** Per call: its name and its arguments' text, reassembled from the parts, as a client would. */
function assemble(parts: readonly ScannedCallPart[]): Array<{ name: string; arguments: string }> {
  const calls: Array<{ name: string; arguments: string }> = [];
  for (const part of parts) {
    if (part.kind === 'start') calls[part.position] = { name: part.name, arguments: '' };
    else calls[part.position].arguments += part.text;
  }
  return calls;
}

const scanAll = (text: string) => new ToolCallScanner().push(text);
const scanByCharacter = (text: string) => {
  const scanner = new ToolCallScanner();
  return [...text].flatMap((char) => scanner.push(char));
};

describe('streamed tool-call scanner', () => {
  const answer = '[{"name":"get_weather","arguments":{"city":"Os\\"lo}]","days":[1,{"x":null}]}}, {"name": "noop", "arguments": {}}]';

  it('finds each call\'s name and its arguments\' exact text, whole or one character at a time', () => {
    const expected = [
      { name: 'get_weather', arguments: '{"city":"Os\\"lo}]","days":[1,{"x":null}]}' },
      { name: 'noop', arguments: '{}' },
    ];
    expect(assemble(scanAll(answer))).toEqual(expected);
    expect(assemble(scanByCharacter(answer))).toEqual(expected);
    for (const call of expected) expect(() => JSON.parse(call.arguments)).not.toThrow();
  });

  it('says a call started as soon as its name is whole, before any argument', () => {
    const scanner = new ToolCallScanner();
    expect(scanner.push('[{"name":"get_wea')).toEqual([]);
    expect(scanner.push('ther","arguments":')).toEqual([]);
    expect(scanner.push(' {"ci')).toEqual([{ kind: 'start', position: 0, name: 'get_weather' }, { kind: 'arguments', position: 0, text: '{"ci' }]);
    expect(scanner.push('ty":1} }')).toEqual([{ kind: 'arguments', position: 0, text: 'ty":1}' }]);
  });

  it('reads bare and string arguments values', () => {
    expect(assemble(scanByCharacter('[{"name":"f","arguments":-12.5 },{"name":"g","arguments":"a}b"}]'))).toEqual([
      { name: 'f', arguments: '-12.5' }, { name: 'g', arguments: '"a}b"' },
    ]);
  });
});
