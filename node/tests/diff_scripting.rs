//! EVAL, EVALSHA, SCRIPT, FUNCTION and FCALL, differential against
//! redis-server 7.0.15: replies, error texts (with the script position),
//! RESP2/RESP3 conversions, sandboxing, cjson/cmsgpack/struct/bit, and
//! FUNCTION DUMP/RESTORE payloads exchanged between the two servers.

mod support;

use std::time::Duration;
use support::*;

#[test]
fn eval_conversions_errors_and_sandbox() {
    let mut d = Diff::new();
    d.exact(&[&b"eval"[..], &b"x = 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('incr', KEYS[1])"[..], &b"1"[..], &b"s"[..]]);
    d.exact(&[&b"set"[..], &b"s"[..], &b"a"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('incr', KEYS[1])"[..], &b"1"[..], &b"s"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('nosuch')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('get')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.call('get')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('blpop','l',0)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call({})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.pcall('incr','s')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.pcall('incr','s')['err']"[..], &b"0"[..]]);
    d.exact(&[&b"eval_ro"[..], &b"return redis.call('set','a','b')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"local t = redis.pcall('incr','s'); return type(t)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return pcall(redis.call, 'incr', 's')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {pcall(function() return foo end)}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('set', KEYS[1], ARGV[1])"[..], &b"1"[..], &b"k"[..], &b"v"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('get', KEYS[1])"[..], &b"1"[..], &b"k"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('get', 'nokey')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('hgetall', 'nokey')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3); return redis.call('hgetall', 'nokey')"[..], &b"0"[..]]);
    d.exact(&[&b"hset"[..], &b"h"[..], &b"a"[..], &b"1"[..], &b"b"[..], &b"2"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3); return redis.call('hgetall', 'h')"[..], &b"0"[..]]);
    d.exact(&[
        &b"eval"[..],
        &b"redis.setresp(3); local t = redis.call('hgetall', 'h'); return t['map']['a']"[..],
        &b"0"[..],
    ]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3); return redis.call('get', 'nokey')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3); return redis.call('get', 'nokey') == nil"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(4)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.sha1hex('')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.sha1hex()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.sha1hex(1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.log(redis.LOG_WARNING, 'hi')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.log()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.log('a','b')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.log(9,'b')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.error_reply()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.error_reply('X')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.error_reply('-ERR x y')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {double=3.14}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {map={a=1}}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {set={a=true}}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {big_number='123'}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {1, {err='e'}, {ok='o'}}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.REDIS_VERSION"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.REDIS_VERSION_NUM"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.call = 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"string.x = 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return string.format('%d', 5)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return tostring(1e100)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('incrbyfloat','f', 1.5)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('set','n', 3.0)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('get','n')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('set','n', 0.1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('get','n')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return select('#', 1,2)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(os)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(io)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(require)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(loadstring)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(print)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(bit)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.band(5,3)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.tohex(65535)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.tohex(-1, -4)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.tobit(0xffffffff + 1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.bnot(0)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.lshift(1, 31)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.arshift(-256, 4)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('select', 1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.call('select', 1); return redis.call('set','x','y')"[..], &b"0"[..]]);
    d.exact(&[&b"get"[..], &b"x"[..]]);
    d.exact(&[&b"select"[..], &b"1"[..]]);
    d.exact(&[&b"script"[..], &b"load"[..], &b"return 'loaded'"[..]]);
    d.exact(&[&b"evalsha"[..], &b"b534286061d4b9e4026607613b95c06c06015ae8"[..], &b"0"[..]]);
    d.exact(&[&b"EVALSHA"[..], &b"B534286061D4B9E4026607613B95C06C06015AE8"[..], &b"0"[..]]);
    d.exact(&[
        &b"script"[..],
        &b"exists"[..],
        &b"b534286061d4b9e4026607613b95c06c06015ae8"[..],
        &b"ffffffffffffffffffffffffffffffffffffffff"[..],
    ]);
    d.exact(&[&b"script"[..], &b"flush"[..]]);
    d.exact(&[&b"script"[..], &b"flush"[..], &b"async"[..]]);
    d.exact(&[&b"script"[..], &b"flush"[..], &b"foo"[..]]);
    d.exact(&[&b"script"[..], &b"exists"[..], &b"b534286061d4b9e4026607613b95c06c06015ae8"[..]]);
    d.exact(&[&b"script"[..], &b"load"[..], &b"return ("[..]]);
    d.exact(&[&b"script"[..]]);
    d.exact(&[&b"script"[..], &b"foo"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('multi')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('eval', 'return 1', 0)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('script', 'load', 'return 1')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('client', 'id') > 0"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('config', 'get', 'maxmemory')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.acl_check_cmd('set','x','y')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.acl_check_cmd('nosuch')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.set_repl(redis.REPL_ALL)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.set_repl(9)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.replicate_commands()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"#!lua flags=no-writes\nreturn redis.call('set','a','b')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"#!lua flags=no-writes\nreturn redis.call('get','a')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"#!lua flags=bad\nreturn 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"#!python\nreturn 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval_ro"[..], &b"#!lua\nreturn 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval_ro"[..], &b"#!lua flags=no-writes\nreturn 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('exists', KEYS[1], KEYS[2])"[..], &b"2"[..], &b"a"[..], &b"b"[..]]);
    d.exact(&[
        &b"eval"[..],
        &b"return #KEYS + #ARGV"[..],
        &b"2"[..],
        &b"a"[..],
        &b"b"[..],
        &b"c"[..],
        &b"d"[..],
        &b"e"[..],
    ]);
    d.exact(&[&b"eval"[..], &b"return ARGV"[..], &b"0"[..], &b"a"[..], &b"b"[..], &b"c"[..]]);
    d.exact(&[&b"eval"[..], &b"return {1, 2, 3.33, 'x', false, true}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {'a', nil, 'b'}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return 'a' .. nil"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"local a = {} a[1] = 1 return a"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.pcall('nosuch')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.pcall()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.status_reply('OK')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.status_reply()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"error()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"error(nil)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"error(1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"error({err='x'}, 0)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return 1 +"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"local t = {} for i=1,10 do t[i] = i end return t"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('ping')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('ping')['ok']"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(redis.call('ping'))"[..], &b"0"[..]]);
    d.exact(&[&b"lpush"[..], &b"mylist"[..], &b"a"[..], &b"b"[..], &b"c"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('lrange', 'mylist', 0, -1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('zadd', 'z', 1, 'a')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3) return redis.call('zscore', 'z', 'a')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3) return redis.call('zscore', 'z', 'a')['double']"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3) return redis.call('smembers', 'nos')"[..], &b"0"[..]]);
    d.exact(&[&b"sadd"[..], &b"st"[..], &b"m"[..]]);
    d.exact(&[&b"eval"[..], &b"redis.setresp(3) return redis.call('smembers', 'st')"[..], &b"0"[..]]);
    d.exact(&[
        &b"eval"[..],
        &b"redis.setresp(3) local r = redis.call('smembers', 'st') return r['set']['m']"[..],
        &b"0"[..],
    ]);
    d.exact(&[&b"eval"[..], &b"return redis.call('hello', '3')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return math.random() >= 0"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return unpack({1,2})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return table.concat({'a','b'}, ',')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return getmetatable('').__index == string"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return _G.KEYS[1]"[..], &b"1"[..], &b"zz"[..]]);
    d.exact(&[&b"eval"[..], &b"rawset(_G, 'x', 1) return 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"local x = redis.call('set', 'foo', 'bar'); return x"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('type', 'foo')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('dbsize')"[..], &b"0"[..]]);
    d.unordered(&[&b"eval"[..], &b"return redis.call('keys', 'f*')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.call('flushdb')"[..], &b"0"[..]]);
    d.finish();
}

#[test]
fn functions_libraries_and_fcall() {
    let mut d = Diff::new();
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=mylib\nredis.register_function('f1', function(keys, args) return redis.call('ping') end)\nredis.register_function{function_name='f2', callback=function(keys, args) return args[1] end, flags={'no-writes'}, description='desc'}"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=mylib\nreturn 1"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=mylib2\nreturn 1"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua\nreturn 1"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!js name=x\n"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=x foo=bar\n"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=x-y\n"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"x"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"replace"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"foo"[..], &b"bar"[..]]);
    d.exact(&[&b"fcall"[..], &b"f1"[..], &b"0"[..]]);
    d.exact(&[&b"fcall"[..], &b"F1"[..], &b"0"[..]]);
    d.exact(&[&b"fcall"[..], &b"f2"[..], &b"0"[..], &b"hello"[..]]);
    d.exact(&[&b"fcall"[..], &b"nosuch"[..], &b"0"[..]]);
    d.exact(&[&b"fcall_ro"[..], &b"f1"[..], &b"0"[..]]);
    d.exact(&[&b"fcall_ro"[..], &b"f2"[..], &b"0"[..], &b"x"[..]]);
    d.exact(&[&b"fcall"[..], &b"f2"[..], &b"-1"[..]]);
    d.exact(&[&b"fcall"[..], &b"f2"[..], &b"5"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..], &b"withcode"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..], &b"libraryname"[..], &b"my"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..], &b"libraryname"[..], &b"nomatch"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..], &b"libraryname"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..], &b"foo"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..], &b"withcode"[..], &b"withcode"[..]]);
    d.exact(&[&b"function"[..], &b"stats"[..]]);
    d.exact(&[&b"function"[..], &b"delete"[..], &b"nosuch"[..]]);
    d.exact(&[&b"function"[..], &b"restore"[..], &b"xxx"[..]]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad\nredis.register_function('f1', function() return 1 end)"[..],
    ]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad2\nredis.call('ping')"[..]]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad3\nredis.register_function('x y', function() return 1 end)"[..],
    ]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad4\nredis.register_function('z', function() return 1 end) local a = b"[..],
    ]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad5\nredis.register_function('z')"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad6\nredis.register_function(1, function() end)"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad7\nredis.register_function('z', 1)"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad8\nredis.register_function{function_name='z'}"[..]]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad9\nredis.register_function{callback=function() end}"[..],
    ]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad10\nredis.register_function{function_name='z', callback=function() end, flags={'bad'}}"[..],
    ]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad11\nredis.register_function{function_name='z', callback=function() end, foo=1}"[..],
    ]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad12\nredis.register_function('z', function() end) redis.register_function('z', function() end)"
            [..],
    ]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad13\nredis.register_function('z', function() end"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad14\nredis.register_function('z', function() end) redis.log(redis.LOG_NOTICE, 'x') return redis.REDIS_VERSION"[..]]);
    d.exact(&[&b"fcall"[..], &b"z"[..], &b"0"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=bad15\nx = 1"[..]]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=bad16\nredis.register_function('w', function() return redis.setresp(3) end)"[..],
    ]);
    d.exact(&[&b"fcall"[..], &b"w"[..], &b"0"[..]]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"replace"[..],
        &b"#!lua name=mylib\nredis.register_function('f3', function(keys, args) return keys[1] .. args[1] end)"[..],
    ]);
    d.exact(&[&b"fcall"[..], &b"f3"[..], &b"1"[..], &b"a"[..], &b"b"[..]]);
    d.exact(&[&b"fcall"[..], &b"f1"[..], &b"0"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=lib4\nredis.register_function('f4', function(keys, args) return redis.call('set', keys[1], args[1]) end)\nredis.register_function{function_name='f5', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}"[..]]);
    d.exact(&[&b"fcall"[..], &b"f4"[..], &b"1"[..], &b"k"[..], &b"v"[..]]);
    d.exact(&[&b"fcall_ro"[..], &b"f5"[..], &b"1"[..], &b"k"[..]]);
    d.exact(&[&b"fcall"[..], &b"f5"[..], &b"1"[..], &b"k"[..]]);
    d.exact(&[&b"function"[..], &b"load"[..], &b"#!lua name=lib5\nredis.register_function{function_name='f6', callback=function(keys) return redis.call('set', keys[1], 1) end, flags={'no-writes'}}"[..]]);
    d.exact(&[&b"fcall"[..], &b"f6"[..], &b"1"[..], &b"k"[..]]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=lib6\nredis.register_function('f7', function() error('boom') end)"[..],
    ]);
    d.exact(&[&b"fcall"[..], &b"f7"[..], &b"0"[..]]);
    d.exact(&[
        &b"function"[..],
        &b"load"[..],
        &b"#!lua name=lib7\nredis.register_function('f8', function() return redis.call('nosuch') end)"[..],
    ]);
    d.exact(&[&b"fcall"[..], &b"f8"[..], &b"0"[..]]);
    d.exact(&[&b"function"[..], &b"stats"[..]]);
    d.exact(&[&b"function"[..], &b"delete"[..], &b"lib7"[..]]);
    d.exact(&[&b"function"[..], &b"help"[..]]);
    d.exact(&[&b"function"[..]]);
    d.exact(&[&b"function"[..], &b"kill"[..]]);
    d.exact(&[&b"function"[..], &b"flush"[..], &b"foo"[..]]);
    d.exact(&[&b"function"[..], &b"flush"[..], &b"async"[..]]);
    d.unordered(&[&b"function"[..], &b"list"[..]]);
    d.exact(&["FUNCTION", "LOAD", "#!lua name=tt\nredis.register_function('tf', function() return 1 end)"]);
    d.exact(&["FCALL", "tf", "abc"]);
    d.exact(&["FCALL", "tf", "1.5"]);
    d.exact(&["FCALL_RO", "tf", "abc"]);
    d.finish();
}

#[test]
fn lua_libraries_cjson_cmsgpack_struct_bit() {
    let mut d = Diff::new();
    d.exact(&[&b"eval"[..], &b"return cjson.encode({1,2,3,'a'})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode({a=1})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode({})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode('a/b\"c\\n')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode(1.5)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode(cjson.null)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode({[1]=1, [3]=3})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode({[1]=1, [30]=3})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode(function() end)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode({[true]=1})"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode(0/0)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode(1/0)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode(123456789012345)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.encode(0.1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('[1,2,\"x\"]')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('{\"a\":{\"b\":[1,2]}}').a.b[2]"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('null') == cjson.null"[..], &b"0"[..]]);
    d.exact(&[
        &b"eval"[..],
        &b"return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')"[..],
        &b"0"[..],
    ]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('[1,')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('{\"a\" 1}')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('\"\\u00e9\"')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('[1] x')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cjson.decode('tru')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"local e = cmsgpack.pack(0.1) local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"local e = cmsgpack.pack(-1099511627776) local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"local e = cmsgpack.pack({1,2,{a='x'}}, 'str', true, nil, 300, -5, 1.5) local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {cmsgpack.unpack(cmsgpack.pack(1, 'a', {3, 4}))}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {cmsgpack.unpack_one(cmsgpack.pack(1, 2), 0)}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 0)}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cmsgpack.unpack('\\xc1')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cmsgpack.unpack('\\xcd')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return cmsgpack.pack()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return struct.pack('>I2', 258)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {struct.unpack('<i4', struct.pack('<i4', -2))}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return struct.size('!4 b i4 d')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {struct.unpack('bhs', struct.pack('bhs', 1, 2, 'hi'))}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return struct.pack('q', 1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {struct.unpack('c0', struct.pack('B', 2) .. 'ab')}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return {struct.unpack('Bc0', struct.pack('B', 2) .. 'ab')}"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.tohex(12345678)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.rol(1, 33)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return bit.bswap(0x12345678)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"cjson.encode = 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"bit.lshift = 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"struct.pack = 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"cmsgpack.pack = 1"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return redis.breakpoint()"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return math.floor(2.5)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return string.rep('x', 3)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return tostring(0.1)"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return tonumber('0x10')"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return coroutine ~= nil"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return type(loadstring('return 1'))"[..], &b"0"[..]]);
    d.exact(&[&b"eval"[..], &b"return loadstring('return 1')()"[..], &b"0"[..]]);
    d.finish();
}

#[test]
fn resp3_conversions_both_ways() {
    let mut d = Diff::new_resp3();
    d.exact(&["HSET", "h", "a", "1"]);
    d.exact(&["ZADD", "z", "1.5", "m"]);
    d.exact(&["SADD", "s", "x"]);
    // Lua values to a RESP3 client.
    d.exact(&["EVAL", "return {map={a=1}}", "0"]);
    d.exact(&["EVAL", "return {set={a=true}}", "0"]);
    d.exact(&["EVAL", "return {double=3.5}", "0"]);
    d.exact(&["EVAL", "return {big_number='123456789012345678901234567890'}", "0"]);
    d.exact(&["EVAL", "return true", "0"]);
    d.exact(&["EVAL", "return false", "0"]);
    d.exact(&["EVAL", "return nil", "0"]);
    // RESP3 replies to Lua after redis.setresp(3), and back.
    d.exact(&["EVAL", "redis.setresp(3) return redis.call('hgetall', 'h')", "0"]);
    d.exact(&["EVAL", "redis.setresp(3) return redis.call('zscore', 'z', 'm')", "0"]);
    d.exact(&["EVAL", "redis.setresp(3) return redis.call('smembers', 's')", "0"]);
    d.exact(&["EVAL", "redis.setresp(3) return redis.call('get', 'nokey')", "0"]);
    d.exact(&["EVAL", "redis.setresp(3) return redis.call('get', 'nokey') == nil", "0"]);
    d.exact(&["EVAL", "redis.setresp(3) return redis.call('exists', 'h') == 1", "0"]);
    d.exact(&["EVAL", "return redis.call('hgetall', 'h')", "0"]);
    d.exact(&["EVAL", "return redis.call('get', 'nokey')", "0"]);
    d.finish();
}

#[test]
fn function_dump_payloads_cross_between_servers() {
    let code = "#!lua name=xlib\nredis.register_function('xf', function(keys, args) return 'xlib-' .. \
                (args[1] or 'none') .. '-padding-padding-padding-padding' end)";
    let redis = Server::redis();
    let strata = Server::strata();
    let mut r = redis.conn();
    let mut s = strata.conn();
    assert_eq!(r.cmd(&["FUNCTION", "LOAD", code]), Frame::bulk("xlib"));
    // Redis's payload (LZF-compressed code) restores into Strata...
    let Frame::Bulk(payload) = r.cmd(&["FUNCTION", "DUMP"]) else { panic!("dump") };
    assert_eq!(s.cmd(&[&b"FUNCTION"[..], b"RESTORE", &payload]), Frame::ok());
    assert_eq!(s.cmd(&["FCALL", "xf", "0", "a"]), r.cmd(&["FCALL", "xf", "0", "a"]));
    assert_eq!(
        s.cmd(&[&b"FUNCTION"[..], b"RESTORE", &payload]),
        r.cmd(&[&b"FUNCTION"[..], b"RESTORE", &payload]),
        "APPEND onto an existing library"
    );
    // ... and Strata's restores into Redis.
    let Frame::Bulk(ours) = s.cmd(&["FUNCTION", "DUMP"]) else { panic!("dump") };
    assert_eq!(r.cmd(&[&b"FUNCTION"[..], b"RESTORE", &ours, b"REPLACE"]), Frame::ok());
    let mut bad = ours.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(
        s.cmd(&[&b"FUNCTION"[..], b"RESTORE", &bad]),
        r.cmd(&[&b"FUNCTION"[..], b"RESTORE", &bad]),
        "bad checksum"
    );
    assert_eq!(s.cmd(&["FUNCTION", "LIST", "WITHCODE"]), r.cmd(&["FUNCTION", "LIST", "WITHCODE"]));
}

#[test]
fn busy_script_gets_busy_replies_and_script_kill() {
    let server = Server::strata_with(&["--threads", "2"]);
    let mut admin = server.conn();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]), Frame::ok());
    let mut runner = server.conn();
    runner.send(&["EVAL", "local i = 0 while true do i = i + 1 end", "0"]);
    // Every other client, whichever worker serves it, gets BUSY once the
    // script has run past the threshold (before that it waits).
    assert!(wait_for(Duration::from_secs(5), || {
        matches!(admin.cmd(&["PING"]), Frame::Error(e) if e.starts_with("BUSY Redis is busy running a script. You can only call SCRIPT KILL"))
    }));
    assert!(matches!(admin.cmd(&["GET", "k"]), Frame::Error(e) if e.starts_with("BUSY")));
    assert!(matches!(admin.cmd(&["FUNCTION", "KILL"]), Frame::Error(e) if e.starts_with("BUSY")));
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), Frame::ok());
    match runner.read_frame() {
        Frame::Error(e) => assert!(e.starts_with("ERR Script killed by user with SCRIPT KILL"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(admin.cmd(&["PING"]), Frame::simple("PONG"));
    assert_eq!(runner.cmd(&["PING"]), Frame::simple("PONG"));
    // A script that wrote cannot be killed; SHUTDOWN NOSAVE still works.
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), Frame::error("NOTBUSY No scripts in execution right now."));
    runner.send(&["EVAL", "redis.call('set', 'w', 1) while true do end", "0"]);
    assert!(wait_for(Duration::from_secs(5), || matches!(admin.cmd(&["PING"]), Frame::Error(_))));
    assert!(matches!(admin.cmd(&["SCRIPT", "KILL"]), Frame::Error(e) if e.starts_with("UNKILLABLE")));
}

#[test]
fn function_kill_and_stats_while_running() {
    let server = Server::strata_with(&["--threads", "2"]);
    let mut admin = server.conn();
    admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let code = "#!lua name=spin\nredis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}";
    assert_eq!(admin.cmd(&["FUNCTION", "LOAD", code]), Frame::bulk("spin"));
    let mut runner = server.conn();
    runner.send(&["FCALL", "spin", "0"]);
    assert!(wait_for(Duration::from_secs(5), || {
        matches!(admin.cmd(&["PING"]), Frame::Error(e) if e.contains("FUNCTION KILL"))
    }));
    let Frame::Array(stats) = admin.cmd(&["FUNCTION", "STATS"]) else { panic!("stats") };
    assert!(matches!(&stats[1], Frame::Array(run) if run.contains(&Frame::bulk("spin"))), "{stats:?}");
    assert!(matches!(admin.cmd(&["SCRIPT", "KILL"]), Frame::Error(e) if e.starts_with("BUSY")));
    assert_eq!(admin.cmd(&["FUNCTION", "KILL"]), Frame::ok());
    assert!(matches!(runner.read_frame(), Frame::Error(e) if e.contains("killed")));
    assert_eq!(runner.cmd(&["FCALL_RO", "spin", "x"]), Frame::error("ERR Bad number of keys provided"));
}

#[test]
fn scripts_inside_multi_exec() {
    let mut d = Diff::new();
    d.exact(&["MULTI"]);
    d.exact(&["SET", "a", "1"]);
    d.exact(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "a"]);
    d.exact(&["EVAL", "return redis.call('get', 'undeclared')", "0"]);
    d.exact(&["EXEC"]);
    d.finish();
}

#[test]
fn declared_keys_not_ready_are_awaited_before_the_script_runs() {
    // The pending path (a key whose value must first be read): a declared
    // key makes the script wait and run once it is ready; an undeclared one
    // cannot be awaited in the middle of a script and is read at once.
    let server = Server::strata_with(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    c.ok(&["SET", "pk", "v"]);
    c.ok(&["DEBUG", "PENDING-DELAY", "200", "pk"]);
    let started = std::time::Instant::now();
    assert_eq!(c.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "pk"]), Frame::bulk("v"));
    assert!(started.elapsed() >= Duration::from_millis(150));
    c.ok(&["DEBUG", "PENDING-DELAY", "200", "pk"]);
    assert_eq!(c.cmd(&["EVAL", "return redis.call('get', 'pk')", "0"]), Frame::bulk("v"));
    assert_eq!(c.cmd(&["PING"]), Frame::simple("PONG"));
}
