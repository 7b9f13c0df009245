# fish completion for podscopectl(1)

function __podscopectl_ids
    podscopectl list --quiet 2>/dev/null | string sub --length 12
end

function __podscopectl_ctr_ids
    podscopectl ps -a --quiet 2>/dev/null | string sub --length 12
end

set -l cmds list status create start stop rm wait update info pull images inspecti rmi imagefsinfo container ps inspect logs exec attach
complete -c podscopectl -f
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -l no-ask-password -d 'do not let polkit ask for a password'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -l version -s V -d 'print the version'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a list -d 'list sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a status -d 'show one sandbox'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a create -d 'create a sandbox'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a start -d 'start sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a stop -d 'stop sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a rm -d 'remove sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a wait -d 'wait until a sandbox stops'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a update -d "set a sandbox's resources"
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a info -d 'runtime version, platform and readiness'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a pull -d 'pull an image'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a images -d 'list images'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a inspecti -d 'show one image as JSON'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a rmi -d 'remove images'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a imagefsinfo -d 'the image store disk use'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a container -d 'create, start, stop, remove or update containers'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a ps -d 'list containers'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a inspect -d 'show one container as JSON'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a logs -d "print a container's output"
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a exec -d 'run a command in a running container'
complete -c podscopectl -n "__fish_seen_subcommand_from status start stop rm wait update; and not __fish_seen_subcommand_from container" -a '(__podscopectl_ids)'
set -l verbs create start stop rm update
complete -c podscopectl -n "__fish_seen_subcommand_from container; and not __fish_seen_subcommand_from $verbs" -a "$verbs"
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from start stop rm update" -a '(__podscopectl_ctr_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from stop" -s t -x -d 'grace period in seconds'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -a '(__podscopectl_ids)'
for opt in env workdir user label log-path cap-add cap-drop memory cpu-quota cpu-period cpu-shares cpuset-cpus attempt
    complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create update" -l $opt -x
end
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l mount -r
for flag in privileged read-only tty stdin start
    complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l $flag
end
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a attach -d 'join a running container'\''s streams'
complete -c podscopectl -n "__fish_seen_subcommand_from inspect logs exec attach" -a '(__podscopectl_ctr_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from exec attach" -s i -d 'with this stdin'
complete -c podscopectl -n "__fish_seen_subcommand_from exec" -s t -d 'on a terminal'
complete -c podscopectl -n "__fish_seen_subcommand_from logs" -s f -l follow -d 'follow the output'
complete -c podscopectl -n "__fish_seen_subcommand_from exec" -l timeout -x -d 'seconds before the command is killed'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -s a -d 'all containers'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -l pod -x -a '(__podscopectl_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -l state -x -a 'created running exited unknown'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -l label -x
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -s q -l quiet -d 'full ids only'
for opt in memory cpu-quota cpu-period cpu-shares pids-limit
    complete -c podscopectl -n "__fish_seen_subcommand_from update" -l $opt -x
end
complete -c podscopectl -n "__fish_seen_subcommand_from list" -l state -x -a 'created ready notready'
complete -c podscopectl -n "__fish_seen_subcommand_from list" -l label -x
complete -c podscopectl -n "__fish_seen_subcommand_from list" -s q -l quiet -d 'full ids only'
for opt in namespace uid attempt hostname label annotation cgroup-parent runtime-handler memory cpu-quota cpu-period cpu-shares pids-limit port dns-server dns-search dns-option sysctl
    complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l $opt -x
end
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l pid-namespace -x -a 'pod container node'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l log-directory -r -a '(__fish_complete_directories)'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l host-network
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l start
